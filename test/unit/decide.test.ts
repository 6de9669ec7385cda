// Table-driven tests of the controller's decisions: observed state in, actions, status and
// events out. No cluster: decide() is pure.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { AGENT_RECHECK_MS, decide } from '../../operator/src/reconcile/decide.ts';
import { networkPolicyName, sandboxPodName } from '../../operator/src/reconcile/names.ts';
import type { ObservedRun, SandboxPodView, TakenName } from '../../operator/src/reconcile/observed-run.ts';
import { codingRunFixture, type CodingRunOverrides } from '../support/coding-run-fixture.ts';

// Opted in to unisolated sandboxes, so the rows below need no isolation verdict; the #11.8 rows turn it off.
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true }, {});
const now = new Date('2026-11-29T12:00:00Z');
const minutesAgo = (minutes: number) => new Date(now.getTime() - minutes * 60_000).toISOString();

function run(overrides: CodingRunOverrides = {}): CodingRun {
  return codingRunFixture({
    ...overrides,
    metadata: { generation: 2, creationTimestamp: minutesAgo(1), ...overrides.metadata },
    spec: { model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } }, ...overrides.spec },
  });
}

const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: minutesAgo(1) },
];
const pod = (overrides: Partial<SandboxPodView> = {}): SandboxPodView => ({
  name: 'fix-sandbox',
  phase: 'Running',
  ready: true,
  deleting: false,
  ...overrides,
});

function observe(r: CodingRun, overrides: Partial<ObservedRun> = {}): ObservedRun {
  return {
    run: r,
    networkPolicyExists: false,
    ownedConfigMaps: [],
    references: { secrets: { llm: ['apiKey'] }, configMaps: {}, secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' } } } as never,
    admission: { active: 0, queuedAhead: 0 },
    ...overrides,
  };
}

const types = (decision: ReturnType<typeof decide>) => decision.actions.map((action) => action.type);

describe('decide: accepting a new run', () => {
  it('adds the finalizer first, then admits a valid run and creates policy and pod', () => {
    const decision = decide(observe(run({ metadata: { finalizers: [] } })), config, now);
    expect(types(decision)).toEqual(['addFinalizer', 'createNetworkPolicy', 'createPod']);
    expect(decision.status).toMatchObject({
      phase: 'Provisioning',
      podName: sandboxPodName(run()),
      startTime: now.toISOString(),
      observedGeneration: 2,
    });
    expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')).toMatchObject({
      status: 'True',
      reason: 'Valid',
      observedGeneration: 2,
    });
    expect(decision.events.map((event) => event.reason)).toEqual(['Accepted', 'Provisioning']);
  });

  it('creates no network policy when the operator config turns them off', () => {
    const decision = decide(observe(run()), { ...config, networkPolicy: false }, now);
    expect(types(decision)).toEqual(['createPod']);
  });

  it.each([
    [
      'a disallowed repository',
      { spec: { repository: { url: 'https://github.com/acme-evil/x' } } },
      {},
      'RepoNotAllowed',
      /does not match the operator's allowRepo/,
    ],
    [
      'a missing API key Secret',
      {},
      { references: { secrets: {}, configMaps: {} } },
      'SecretNotFound',
      /Secret agents\/llm named in spec.model.apiKeySecretRef does not exist/,
    ],
    [
      'a Secret without the key',
      {},
      { references: { secrets: { llm: ['token'] }, configMaps: {} } },
      'SecretNotFound',
      /has no key "apiKey"/,
    ],
    [
      'security #11.3: a Secret not labelled usable-by-runs',
      {},
      { references: { secrets: { llm: ['apiKey'] }, configMaps: {}, secretLabels: { llm: {} } } },
      'SecretNotAllowed',
      /kubectl label secret llm -n agents chamvi.dev\/usable-by-runs=true/,
    ],
    [
      'security #11.3: an openai-compatible endpoint not in allowModelEndpoints',
      {
        spec: { model: { provider: 'openai-compatible', name: 'm', baseURL: 'http://10.0.0.1:8080/v1', apiKeySecretRef: { name: 'llm' } } },
      },
      {},
      'ModelEndpointNotAllowed',
      /no model endpoint is allowed yet/,
    ],
    [
      'security #11.10: a sandbox image not in allowImages',
      { spec: { sandbox: { image: 'registry.example/tenant-a/private:1' } } },
      {},
      'ImageNotAllowed',
      /allowImages/,
    ],
    [
      'a scripted run without its ConfigMap',
      { spec: { model: { provider: 'scripted', scriptRef: { name: 'demo' } } } },
      {},
      'ConfigMapNotFound',
      /ConfigMap agents\/demo named in spec.model.scriptRef does not exist/,
    ],
    ['a spec the schema refuses', { spec: { task: '' } }, {}, 'InvalidSpec', /spec.task/],
  ])('refuses %s: Failed with the reason, no pod', (_, runOverrides, observedOverrides, reason, message) => {
    const decision = decide(observe(run(runOverrides as never), observedOverrides), config, now);
    expect(types(decision)).not.toContain('createPod');
    expect(decision.status).toMatchObject({
      phase: 'Failed',
      reason,
      message: expect.stringMatching(message),
      completionTime: now.toISOString(),
    });
    expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'False', reason });
    expect(decision.status!.conditions!.find((c) => c.type === 'Complete')).toMatchObject({ status: 'True', reason });
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason })]);
  });

  it('queues a valid run when the slots are taken, and says so', () => {
    const decision = decide(observe(run(), { admission: { active: 1, queuedAhead: 1 } }), config, now);
    expect(types(decision)).toEqual([]);
    expect(decision.status).toMatchObject({
      phase: 'Pending',
      reason: 'Queued',
      message: expect.stringContaining('1 of 2 runs active, 1 queued ahead'),
    });
    expect(decision.requeueAfterMs).toBeGreaterThan(0);
  });

  it('admits a queued run when a slot frees, without validating it again', () => {
    const queued = run({ status: { phase: 'Pending', reason: 'Queued', conditions: accepted } });
    const decision = decide(observe(queued, { references: undefined, admission: { active: 1, queuedAhead: 0 } }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Provisioning' });
    expect(decision.status!.reason).toBeUndefined();
  });
});

describe('decide: provisioning and running', () => {
  const provisioning = run({ status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: 'fix-sandbox', conditions: accepted } });

  it('creates the pod again if the cache does not have it yet (the name makes it idempotent)', () => {
    const decision = decide(observe(provisioning, { networkPolicyExists: true }), config, now);
    expect(types(decision)).toEqual(['createPod']);
    expect(decision.status!.phase).toBe('Provisioning');
  });

  it('waits for a pending pod and says why', () => {
    const decision = decide(
      observe(provisioning, { networkPolicyExists: true, pod: pod({ phase: 'Pending', ready: false, reason: 'Unschedulable' }) }),
      config,
      now,
    );
    expect(types(decision)).toEqual([]);
    expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')).toMatchObject({ status: 'False', reason: 'Unschedulable' });
  });

  it('moves to Running and starts the agent when the pod is ready', () => {
    const decision = decide(observe(provisioning, { networkPolicyExists: true, pod: pod() }), config, now);
    expect(types(decision)).toEqual(['startAgent']);
    expect(decision.status).toMatchObject({ phase: 'Running' });
    expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')).toMatchObject({ status: 'True' });
    expect(decision.events.map((event) => event.reason)).toEqual(['SandboxReady']);
  });

  it('asks to look again at the deadline while provisioning, and often once the agent works', () => {
    const waiting = decide(observe(provisioning, { networkPolicyExists: true, pod: pod({ phase: 'Pending', ready: false }) }), config, now);
    expect(waiting.requeueAfterMs).toBe(29 * 60_000);
    const started = decide(observe(provisioning, { networkPolicyExists: true, pod: pod() }), config, now);
    expect(started.requeueAfterMs).toBe(AGENT_RECHECK_MS);
  });

  const running = run({ status: { phase: 'Running', startTime: minutesAgo(2), podName: 'fix-sandbox', conditions: accepted } });

  it.each([
    ['the pod is gone', undefined, /disappeared before the run ended/],
    ['the pod failed', pod({ phase: 'Failed', ready: false, reason: 'Evicted' }), /is Failed \(Evicted\)/],
    ['the pod is being deleted', pod({ deleting: true }), /is being deleted/],
  ])('fails with SandboxLost when %s', (_, observedPod, message) => {
    const decision = decide(observe(running, { networkPolicyExists: true, ...(observedPod ? { pod: observedPod } : {}) }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxLost', message: expect.stringMatching(message) });
    expect(types(decision)).toContain('stopAgent');
    expect(types(decision)).toContain('deleteNetworkPolicy');
    expect(types(decision)).not.toContain('createPod');
  });

  it('fails with DeadlineExceeded past budget.timeout and removes the sandbox', () => {
    const late = run({ spec: { budget: { timeout: '1m' } }, status: { phase: 'Running', startTime: minutesAgo(2), conditions: accepted } });
    const decision = decide(observe(late, { networkPolicyExists: true, pod: pod() }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(types(decision)).toEqual(['stopAgent', 'deletePod', 'deleteNetworkPolicy']);
  });

  it('reads a pod ended by activeDeadlineSeconds as DeadlineExceeded, not SandboxLost', () => {
    const decision = decide(observe(running, { pod: pod({ phase: 'Failed', ready: false, reason: 'DeadlineExceeded' }) }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
  });

  it('keeps lastTransitionTime of a condition whose status did not change', () => {
    const decision = decide(observe(running, { networkPolicyExists: true, pod: pod() }), config, now);
    expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')!.lastTransitionTime).toBe(minutesAgo(1));
  });
});

describe('decide: the agent of a started run', () => {
  const running = run({ status: { phase: 'Running', startTime: minutesAgo(2), podName: 'fix-sandbox', steps: 3, conditions: accepted } });
  const waiting = run({
    status: {
      phase: 'WaitingForApproval',
      startTime: minutesAgo(2),
      podName: 'fix-sandbox',
      conditions: accepted,
      pendingApproval: { id: 's1-c1', toolName: 'bash', input: '{}', requestedAt: minutesAgo(1) },
    },
  });
  const sandbox = { networkPolicyExists: true, pod: pod() };

  it.each([
    ['its state is gone from Redis', running, { state: 'missing', moving: false }, 'StateLost', /working state is gone from Redis/],
    [
      'its state is gone while it waits for approval',
      waiting,
      { state: 'missing', moving: false },
      'StateLost',
      /working state is gone from Redis/,
    ],
    ['no job is left to move it on', running, { state: 'stepping', moving: false }, 'StateLost', /No job is left in Redis/],
    ['its finalize job is gone', running, { state: 'finalizing', moving: false }, 'StateLost', /No job is left in Redis/],
    [
      'its last job failed for good',
      running,
      { state: 'stepping', moving: false, failedJob: 'job stalled more than allowable limit' },
      'AgentFailed',
      /failed for good \(job stalled more than allowable limit\)/,
    ],
  ] as const)('fails the run when %s, and stops its sandbox after', (_, subject, agent, reason, message) => {
    const decision = decide(observe(subject, { ...sandbox, agent: { ...agent } }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason, message: expect.stringMatching(message) });
    expect(types(decision)).toEqual(['stopAgent', 'deletePod', 'deleteNetworkPolicy']);
  });

  it.each([
    ['a job moves it on', running, { state: 'stepping', moving: true }],
    ['it waits for a human', waiting, { state: 'waiting', moving: false }],
    ['Redis cannot be asked', running, undefined],
  ] as const)('leaves the run alone when %s, and looks again soon', (_, subject, agent) => {
    const decision = decide(observe(subject, { ...sandbox, ...(agent ? { agent: { ...agent } } : {}) }), config, now);
    expect(decision.status!.phase).toBe(subject.status!.phase);
    expect(types(decision)).toEqual([]);
    expect(decision.requeueAfterMs).toBe(AGENT_RECHECK_MS);
  });

  it('names a lost pod rather than the state it took with it', () => {
    const decision = decide(observe(running, { networkPolicyExists: true, agent: { state: 'missing', moving: false } }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxLost' });
  });

  it('does not judge the agent of a run it is only now starting', () => {
    const provisioning = run({ status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: 'fix-sandbox', conditions: accepted } });
    const decision = decide(observe(provisioning, { ...sandbox, agent: { state: 'missing', moving: false } }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Running' });
    expect(types(decision)).toEqual(['startAgent']);
  });
});

describe('decide: finished and deleted runs', () => {
  const succeeded = run({
    spec: { ttlSecondsAfterFinished: 600 },
    status: { phase: 'Succeeded', reason: 'Completed', completionTime: minutesAgo(5), conditions: accepted },
  });

  it('never rewrites the status of a finished run, and stops its agent until the sandbox is gone', () => {
    const decision = decide(observe(succeeded, { pod: pod({ phase: 'Failed' }) }), config, now);
    expect(decision.status).toBeUndefined();
    expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
    expect(types(decide(observe(succeeded, { pod: pod({ deleting: true }) }), config, now))).toEqual(['stopAgent']);
  });

  it('waits out ttlSecondsAfterFinished, then deletes the run', () => {
    expect(decide(observe(succeeded), config, now).requeueAfterMs).toBe(5 * 60_000);
    const later = new Date(now.getTime() + 5 * 60_000);
    expect(types(decide(observe(succeeded), config, later))).toEqual(['deleteRun']);
  });

  it('removes pod, policy and ConfigMaps of a deleted run before the finalizer', () => {
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString() }, status: { phase: 'Running' } });
    const first = decide(observe(deleted, { pod: pod(), networkPolicyExists: true, ownedConfigMaps: ['fix-diff'] }), config, now);
    expect(types(first)).toEqual(['stopAgent', 'deletePod', 'deleteNetworkPolicy', 'deleteConfigMaps']);
    expect(first.status).toBeUndefined();
    const last = decide(observe(deleted), config, now);
    expect(types(last)).toEqual(['stopAgent', 'removeFinalizer']);
  });

  it('does nothing for a deleted run that has no finalizer', () => {
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString(), finalizers: [] } });
    expect(decide(observe(deleted), config, now).actions).toEqual([]);
  });
});

describe('security #11.14 decide: a foreign object holding the sandbox name', () => {
  const provisioning = run({
    status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: sandboxPodName(run()), conditions: accepted },
  });
  const running = run({ status: { phase: 'Running', startTime: minutesAgo(2), podName: sandboxPodName(run()), conditions: accepted } });
  // Accepted already, so only the sandbox is left to decide.
  const admitted = (overrides: Parameters<typeof run>[0] = {}) => run({ ...overrides, status: { phase: 'Pending', conditions: accepted } });
  const foreignPod: TakenName = { kind: 'Pod', name: sandboxPodName(run()), why: 'it has no controller ownerReference' };
  const foreignPolicy: TakenName = { kind: 'NetworkPolicy', name: networkPolicyName(run()), why: 'it has no controller ownerReference' };

  it.each([
    [
      'an admitted run about to get its pod, the pod name taken',
      admitted({ metadata: { finalizers: [] } }),
      {},
      [foreignPod],
      ['addFinalizer', 'stopAgent'],
    ],
    ['an admitted run about to get its pod, the policy name taken', admitted(), {}, [foreignPolicy], ['stopAgent']],
    [
      'a provisioning run whose pod name is taken',
      provisioning,
      { networkPolicyExists: true },
      [foreignPod],
      ['stopAgent', 'deleteNetworkPolicy'],
    ],
    [
      'a running run whose pod was replaced by a foreign one',
      running,
      { networkPolicyExists: true },
      [foreignPod],
      ['stopAgent', 'deleteNetworkPolicy'],
    ],
    ['a running run whose policy name is taken', running, { pod: pod() }, [foreignPolicy], ['stopAgent', 'deletePod']],
  ])('fails %s with SandboxNameTaken, creating nothing and deleting only its own objects', (_, r, seen, takenNames, actions) => {
    const decision = decide(observe(r, { references: undefined, ...seen, takenNames }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxNameTaken' });
    expect(decision.status!.message).toContain(
      `${takenNames[0]!.kind} agents/${takenNames[0]!.name} (it has no controller ownerReference)`,
    );
    expect(decision.status!.message).toMatch(/neither uses nor deletes it.*delete it, and create the run again/);
    expect(types(decision)).toEqual(actions);
    expect(decision.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'SandboxNameTaken' }));
  });

  it('leaves a foreign holder alone once the run has ended or is deleted', () => {
    const failed = run({ status: { phase: 'Failed', reason: 'SandboxNameTaken', completionTime: minutesAgo(1), conditions: accepted } });
    expect(types(decide(observe(failed, { takenNames: [foreignPod] }), config, now))).toEqual([]);
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString() }, status: failed.status! });
    expect(types(decide(observe(deleted, { takenNames: [foreignPod, foreignPolicy] }), config, now))).toEqual([
      'stopAgent',
      'removeFinalizer',
    ]);
  });
});

describe('security #11.8 decide: no sandbox where NetworkPolicy is not enforced', () => {
  const strict = { ...config, allowUnisolatedSandboxes: false };
  const fresh = run({ metadata: { finalizers: [] } });

  it('waits in Pending with IsolationNotEnforced while the namespace is unknown, creating nothing', () => {
    for (const isolation of [undefined, { verdict: 'unknown' as const, detail: 'a probe pod is checking' }]) {
      const decision = decide(observe(fresh, isolation ? { isolation } : {}), strict, now);
      expect(types(decision)).toEqual(['addFinalizer']);
      expect(decision.status).toMatchObject({
        phase: 'Pending',
        reason: 'IsolationNotEnforced',
        message: expect.stringContaining('namespace agents'),
      });
      expect(decision.status!.startTime).toBeUndefined();
      expect(decision.requeueAfterMs).toBeGreaterThan(0);
    }
  });

  it('fails the run when the probe found isolation not enforced, and says what a sandbox would reach and how to opt in', () => {
    const isolation = {
      verdict: 'unenforced' as const,
      detail: 'a probe pod under a deny-all NetworkPolicy still reached 10.0.0.5:8080 after 10s',
    };
    const decision = decide(observe(fresh, { isolation }), strict, now);
    expect(types(decision)).not.toContain('createPod');
    expect(types(decision)).not.toContain('createNetworkPolicy');
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'IsolationNotEnforced' });
    expect(decision.status!.message).toContain(
      'NetworkPolicy is not enforced in namespace agents: a probe pod under a deny-all NetworkPolicy still reached 10.0.0.5:8080',
    );
    expect(decision.status!.message).toMatch(/Redis .*cloud metadata.*API server.*internal services.*internet/);
    expect(decision.status!.message).toContain('allowUnisolatedSandboxes: true');
    expect(decision.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'IsolationNotEnforced' }));
  });

  it('lets a run through where the probe showed enforcement: policy and pod are created', () => {
    const decision = decide(observe(fresh, { isolation: { verdict: 'enforced' } }), strict, now);
    expect(types(decision)).toEqual(['addFinalizer', 'createNetworkPolicy', 'createPod']);
    expect(decision.status).toMatchObject({ phase: 'Provisioning' });
  });

  it('refuses every run when the operator creates no NetworkPolicy, even where the probe would say enforced', () => {
    const decision = decide(observe(fresh, { isolation: { verdict: 'enforced' } }), { ...strict, networkPolicy: false }, now);
    expect(types(decision)).not.toContain('createPod');
    expect(decision.status).toMatchObject({
      phase: 'Failed',
      reason: 'IsolationNotEnforced',
      message: expect.stringContaining('networkPolicy: false'),
    });
  });

  it.each([
    ['unenforced', { verdict: 'unenforced' as const }, true],
    ['unknown', { verdict: 'unknown' as const }, true],
    ['networkPolicy false', { verdict: 'unknown' as const }, false],
  ])('starts the run anyway (%s) when the admin allows unisolated sandboxes', (_, isolation, networkPolicy) => {
    const decision = decide(observe(fresh, { isolation }), { ...strict, allowUnisolatedSandboxes: true, networkPolicy }, now);
    expect(types(decision)).toContain('createPod');
    expect(decision.status).toMatchObject({ phase: 'Provisioning' });
  });

  it('moves a run that waited for the probe on once the verdict is enforced, and leaves a started run alone', () => {
    const waited = run({ status: { phase: 'Pending', reason: 'IsolationNotEnforced', conditions: accepted } });
    expect(decide(observe(waited, { references: undefined, isolation: { verdict: 'enforced' } }), strict, now).status).toMatchObject({
      phase: 'Provisioning',
    });
    const started = run({ status: { phase: 'Running', startTime: minutesAgo(2), podName: 'fix-sandbox', conditions: accepted } });
    const decision = decide(observe(started, { networkPolicyExists: true, pod: pod() }), strict, now);
    expect(decision.status!.phase).toBe('Running');
  });
});
