// A run that continues another (spec.continueFrom) is accepted only from a finished source: who
// wrote what the source started from (its template, the runs it continued) is on the source only
// once the source itself was accepted, and a follow-up applied with its source (GitOps) could be
// looked at first, recording the source's creator alone; the chain's first writer then approved
// it. So a follow-up whose source has not finished is refused at acceptance, InvalidSpec, before
// it takes a slot (reconcile/continue-from-pin.ts, decide.ts), and one accepted without the record
// (a lost warm-claim write) is pinned only once its source has finished and was itself accepted;
// until then no answer to it is acted on (separation-of-duties.ts).
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun, CodingRunSpec, CodingRunStatus } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import { observeContinueFromSource, pinAfterAcceptance, type RunLookup } from '../../operator/src/reconcile/continue-from-pin.ts';
import { decide } from '../../operator/src/reconcile/decide.ts';
import type { ObservedRun } from '../../operator/src/reconcile/observed-run.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import { separationOfDutiesRefusal } from '../../operator/src/reconcile/separation-of-duties.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const now = new Date('2026-11-29T12:00:00Z');
const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);
const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: now.toISOString() },
];

/** Ron's finished run `zero`. */
const zero = codingRunFixture({
  metadata: { name: 'zero', uid: 'uid-zero', annotations: { 'chamvi.dev/created-by': 'ron' } },
  status: { phase: 'Succeeded', conditions: accepted },
});
/** Vera's `first`, continuing `zero`, as it is at `status` (none: not looked at yet). */
const first = (status?: CodingRunStatus) =>
  codingRunFixture({
    metadata: { name: 'first', uid: 'uid-first', annotations: { 'chamvi.dev/created-by': 'vera' } },
    spec: { continueFrom: { name: 'zero' } },
    ...(status ? { status } : {}),
  });
/** `first` once it was accepted (recording ron) and has finished. */
const firstFinished = () =>
  first({ phase: 'Succeeded', conditions: accepted, continuedFrom: { name: 'zero', uid: 'uid-zero', writtenBy: ['ron'] } });
/** Uma's `second`, continuing `first`, applied with it. */
const second = (status?: CodingRunStatus, annotations: Record<string, string> = {}) =>
  codingRunFixture({
    metadata: {
      name: 'second',
      uid: 'uid-second',
      creationTimestamp: '2026-11-29T11:59:00Z',
      annotations: { 'chamvi.dev/created-by': 'uma', ...annotations },
    },
    spec: { continueFrom: { name: 'first' }, approval: { tools: ['bash'], timeout: '2h' } },
    ...(status ? { status } : {}),
  });
const cacheOf = (...held: CodingRun[]): RunLookup => ({
  get: (namespace, name) => held.find((each) => each.metadata.namespace === namespace && each.metadata.name === name),
});

/** What the reconciler hands decide() for a run not accepted yet, without an admission: a refused run asks for none. */
const observeUnaccepted = (run: CodingRun, runs: RunLookup): ObservedRun => ({
  run,
  networkPolicyExists: false,
  ownedConfigMaps: [],
  references: { secrets: {}, configMaps: { script: ['script.json'] }, secretLabels: {} } as never,
  ...observeContinueFromSource(run, runs),
});

const notFinished = (name: string, phase: string) =>
  `spec.continueFrom names CodingRun ${name}, which has not finished (phase ${phase}); wait for it ` +
  `(kubectl wait --for=condition=Reconciling=False crun/${name}) and create this run again.`;

describe('a follow-up whose source has not finished', () => {
  it.each([
    ['not looked at yet (no phase)', undefined, 'none yet'],
    ['queued', { phase: 'Pending' as const, reason: 'Queued', conditions: accepted }, 'Pending'],
    ['waiting for an approval', { phase: 'WaitingForApproval' as const, conditions: accepted }, 'WaitingForApproval'],
  ])(
    'is refused at acceptance, InvalidSpec, saying to wait for it and create the run again; no slot, no sandbox: source %s',
    (_, status, shown) => {
      const decision = decide(observeUnaccepted(second(), cacheOf(first(status), zero)), config, now);
      expect(decision.actions).toEqual([]);
      expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', message: notFinished('first', shown) });
      expect(decision.status).not.toHaveProperty('continuedFrom');
      expect(decision.status).not.toHaveProperty('admission');
      expect(decision.status).not.toHaveProperty('podName');
      expect(decision.status!.conditions?.find((condition) => condition.type === 'Accepted')).toMatchObject({
        status: 'False',
        reason: 'InvalidSpec',
      });
      // Refused for good: nothing looks at it again.
      expect(decision.requeueAfterMs).toBeUndefined();
    },
  );

  it('is refused when it names itself: it is its own source, and has not finished', () => {
    const self = codingRunFixture({ metadata: { name: 'self', uid: 'uid-self' }, spec: { continueFrom: { name: 'self' } } });
    const decision = decide(observeUnaccepted(self, cacheOf(self)), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', message: notFinished('self', 'none yet') });
  });

  it('ends a pair naming each other: the first looked at is refused, and neither waits', () => {
    const a = codingRunFixture({ metadata: { name: 'a', uid: 'uid-a' }, spec: { continueFrom: { name: 'b' } } });
    const b = codingRunFixture({ metadata: { name: 'b', uid: 'uid-b' }, spec: { continueFrom: { name: 'a' } } });
    const decidedA = decide(observeUnaccepted(a, cacheOf(a, b)), config, now);
    expect(decidedA.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', message: notFinished('b', 'none yet') });
    // b then names a run that ended refused: pinned, and the prepare job refuses it (no commit), as any such source.
    const refusedA = { ...a, status: decidedA.status! };
    const decidedB = decide({ ...observeUnaccepted(b, cacheOf(refusedA, b)), admission: { admit: true, sequence: 1 } }, config, now);
    expect(decidedB.status).toMatchObject({ phase: 'Provisioning', continuedFrom: { name: 'a', uid: 'uid-a' } });
  });

  it("is accepted once the source has finished, recording the writers the source's own acceptance recorded: the chain's first writer may not approve", () => {
    const decision = decide(
      { ...observeUnaccepted(second(), cacheOf(firstFinished(), zero)), admission: { admit: true, sequence: 1 } },
      config,
      now,
    );
    expect(decision.status).toMatchObject({
      phase: 'Provisioning',
      continuedFrom: { name: 'first', uid: 'uid-first', writtenBy: ['vera', 'ron'] },
    });
    const answer = { id: 's1-c1', decision: 'approve' as const, sha256: 'a'.repeat(64), user: 'ron' };
    expect(separationOfDutiesRefusal({ ...second(), status: decision.status! }, answer)).toMatch(/"ron" wrote the task of CodingRun first/);
  });
});

/** A reconciler over in-memory caches holding `held`, whose status writes land (and reach the cache). */
function reconcilerOf(...held: CodingRun[]) {
  const runs = new MemoryCache(held);
  const statuses: CodingRunStatus[] = [];
  const created: string[] = [];
  const kube = {
    getRun: async (namespace: string, name: string) => runs.get(namespace, name),
    replaceRunStatus: async (current: CodingRun, status: CodingRunStatus) => {
      statuses.push(status);
      runs.put({ ...current, status });
      return { ...current, status };
    },
    setRunFinalizers: async (current: CodingRun, finalizers: string[]) => ({ ...current, metadata: { ...current.metadata, finalizers } }),
    createPod: async (pod: V1Pod) => {
      created.push(pod.metadata!.name!);
      return { created: pod };
    },
    configMapKeys: async () => ['script.json'],
    createEvent: async () => {},
  };
  const reconciler = new RunReconciler({
    caches: {
      runs,
      pods: new MemoryCache<V1Pod>(),
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps: new MemoryCache(),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: kube as never,
    agent: idleAgent,
    events: { record: async () => {} } as never,
    config,
    logger: { info: () => {}, warn: () => {} },
    now: () => now,
  });
  return { reconciler, runs, statuses, created };
}

describe('the reconciler: a follow-up applied together with its source', () => {
  it('refuses it while the source runs, with no pod and no admission', async () => {
    const { reconciler, statuses, created } = reconcilerOf(second(), first({ phase: 'Running', conditions: accepted }), zero);
    await reconciler.reconcile('agents/second');
    expect(created).toEqual([]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', message: notFinished('first', 'Running') });
    expect(statuses.at(-1)).not.toHaveProperty('admission');
    expect(statuses.at(-1)).not.toHaveProperty('continuedFrom');
  });

  it('refuses a run naming itself', async () => {
    const self = codingRunFixture({ metadata: { name: 'self', uid: 'uid-self' }, spec: { continueFrom: { name: 'self' } } });
    const { reconciler, statuses, created } = reconcilerOf(self);
    await reconciler.reconcile('agents/self');
    expect(created).toEqual([]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', message: notFinished('self', 'none yet') });
  });

  it('accepts it, with the whole chain, when the source has finished', async () => {
    const { reconciler, statuses, created } = reconcilerOf(second(), firstFinished(), zero);
    await reconciler.reconcile('agents/second');
    expect(created).toEqual([sandboxPodName(second())]);
    expect(statuses.at(-1)).toMatchObject({
      phase: 'Provisioning',
      continuedFrom: { name: 'first', uid: 'uid-first', writtenBy: ['vera', 'ron'] },
    });
  });
});

describe('pinAfterAcceptance: the record of a run accepted without it', () => {
  const spec = { continueFrom: { name: 'first' } } as CodingRunSpec;
  const pinOf = (source: CodingRun) =>
    pinAfterAcceptance('agents', spec, observeContinueFromSource(second(), cacheOf(source, zero)).continueFromSource);

  it.each([
    ['running', first({ phase: 'Running', conditions: accepted })],
    ['not looked at yet', first()],
    // Made from a template by mallory: not accepted, so the template's writer is not on it yet.
    ['never accepted, still pending', first({ phase: 'Pending', reason: 'Queued' })],
    ['never accepted, ended refused', first({ phase: 'Failed', reason: 'InvalidSpec' })],
  ])('pins nothing from a source %s: its writers are not all known', (_, source) => {
    expect(pinOf(source)).toBeUndefined();
  });

  it('pins a finished source that was accepted, with all its writers', () => {
    expect(pinOf(firstFinished())).toEqual({ name: 'first', uid: 'uid-first', writtenBy: ['vera', 'ron'] });
  });
});

// The warm-pool path accepts a run in the write that also makes it Running; when that write met a
// conflict, the workers' Running landed first, and the next decision set Accepted=True
// (recordAgentStart) without status.continuedFrom.
describe('a started run accepted without its pin', () => {
  const input = '{"command":"make"}';
  const sod = { ...config, approvalSeparationOfDuties: true };
  const started = (approver?: string) =>
    second(
      {
        phase: 'WaitingForApproval',
        startTime: now.toISOString(),
        podName: 'default-warm-abcde',
        conditions: accepted,
        pendingApproval: { id: 's1-c1', toolName: 'bash', input, requestedAt: now.toISOString() },
      },
      approver
        ? {
            'chamvi.dev/approval': JSON.stringify({ id: 's1-c1', decision: 'approve', sha256: 'a'.repeat(64) }),
            'chamvi.dev/approver': approver,
          }
        : {},
    );
  const observeStarted = (run: CodingRun, runs: RunLookup): ObservedRun => ({
    run,
    networkPolicyExists: false,
    ownedConfigMaps: [],
    pod: { name: 'default-warm-abcde', phase: 'Running', ready: true, deleting: false, claimed: true },
    agent: { state: 'waiting', moving: false } as never,
    ...observeContinueFromSource(run, runs),
  });

  it('stays unpinned while its source has not finished, and acts on no answer meanwhile, a writer’s or anyone’s', () => {
    for (const approver of ['ron', 'bob']) {
      const decision = decide(
        observeStarted(started(approver), cacheOf(first({ phase: 'Running', conditions: accepted }), zero)),
        sod,
        now,
      );
      expect(decision.status).not.toHaveProperty('continuedFrom');
      expect(decision.actions.map((action) => action.type)).not.toContain('resumeAgent');
      expect(decision.events).toEqual([
        expect.objectContaining({
          reason: 'ApprovalIgnored',
          message: expect.stringMatching(/whose writers the operator has not recorded/),
        }),
      ]);
    }
  });

  it('is pinned by the next decision once the source has finished, and the source’s writers’ answers are ignored in that same decision', () => {
    const decision = decide(observeStarted(started('ron'), cacheOf(firstFinished(), zero)), sod, now);
    expect(decision.status).toMatchObject({
      phase: 'WaitingForApproval',
      continuedFrom: { name: 'first', uid: 'uid-first', writtenBy: ['vera', 'ron'] },
    });
    expect(decision.actions.map((action) => action.type)).not.toContain('resumeAgent');
    expect(decision.events).toEqual([
      expect.objectContaining({ reason: 'ApprovalIgnored', message: expect.stringMatching(/"ron" wrote the task of CodingRun first/) }),
    ]);
  });

  it('acts on no answer while its source cannot be pinned (gone since): any might be a writer’s', () => {
    const decision = decide(observeStarted(started('bob'), cacheOf(zero)), sod, now);
    expect(decision.status).not.toHaveProperty('continuedFrom');
    expect(decision.actions.map((action) => action.type)).not.toContain('resumeAgent');
    expect(decision.events).toEqual([
      expect.objectContaining({ reason: 'ApprovalIgnored', message: expect.stringMatching(/whose writers the operator has not recorded/) }),
    ]);
  });

  it('is pinned by the reconciler, which looks its source up though the run is past acceptance', async () => {
    const { reconciler, statuses } = reconcilerOf(
      second({ phase: 'Pending', reason: 'Queued', conditions: accepted }),
      firstFinished(),
      zero,
    );
    await reconciler.reconcile('agents/second');
    expect(statuses.at(-1)).toMatchObject({ continuedFrom: { name: 'first', uid: 'uid-first', writtenBy: ['vera', 'ron'] } });
  });
});
