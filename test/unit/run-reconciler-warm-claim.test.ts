// The reconciler's side of warm pools, driven through reconcile() over caches held in memory: which
// pod a run takes as its claimed one (only a pod the pool loop made and claimed for it, never one
// that merely carries its labels and a copied owner), what a refused claim leaves the run with (a
// fresh pod at once, not a reconcile that fails for as long as the refusal lasts; a 504 is no
// refusal, and is fenced off: the pool pod deleted unless the claim landed first), that a claim
// another replica made is known by its seal, and that a finished run's
// cleanup deletes every pool pod claimed for it, named in its status or not.
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRun, type CodingRunStatus } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { CLAIMED_FROM_LABEL, claimPatch, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { CLAIM_SEAL_ANNOTATION, WarmPoolClaimSeal } from '../../operator/src/reconcile/warm-pool-claim-seal.ts';
import { JsonPatchTestFailed, applyAsApiServer } from '../support/api-server-json-patch.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const pool: WarmPoolConfig = { name: 'default', namespace: 'agents', size: 1 };
const gvisorPool: WarmPoolConfig = { name: 'gvisor', namespace: 'agents', size: 1, runtimeClassName: 'gvisor' };

/** The key every replica shares (config.stateKey, from the chart's Secret). */
const STATE_KEY = 'k'.repeat(64);

const configWith = (warmPools: WarmPoolConfig[]) =>
  loadOperatorConfig(
    {
      allowRepo: ['https://github.com/acme/*'],
      maxActiveRuns: 2,
      allowUnisolatedSandboxes: true,
      networkPolicy: false,
      warmPools,
      stateKey: STATE_KEY,
    },
    {},
  );

/** The run `fix` (uid-1) in agents, parsed as the reconciler parses it. */
const parsed = (run: CodingRun) => {
  const result = parseSpec(run);
  if (!result.ok) throw new Error('the fixture run does not parse');
  return { ...run, spec: result.spec };
};

/** The template the pool loop builds its pods from: any valid run. */
const template = {
  apiVersion: 'chamvi.dev/v1alpha1' as const,
  kind: 'CodingRun' as const,
  metadata: { name: 'warm', namespace: 'warm', uid: 'warm' },
  spec: codingRunSpec.parse({
    task: 't',
    repository: { url: 'https://example.invalid/w.git' },
    model: { provider: 'scripted', scriptRef: { name: 'warm' } },
  }),
};

/** A ready pod of `of`, as the pool loop made it and the API server holds it. */
function poolPod(of: WarmPoolConfig, name: string, uid: string): V1Pod {
  const pod = warmPoolPod(of, configWith([of]), template);
  pod.metadata = { ...pod.metadata, name, uid, generation: 1, creationTimestamp: new Date('2026-11-29T11:00:00Z') };
  pod.status = { phase: 'Running', startTime: new Date('2026-11-29T11:00:05Z'), conditions: [{ type: 'Ready', status: 'True' }] };
  return pod;
}

/**
 * A pool pod once `run`'s claim patch reached it: its deadline the run's 30 minutes and the hour it
 * waited warm (the API server counts the deadline it sets as a spec change).
 */
function claimedFor(run: CodingRun, of: WarmPoolConfig, name: string, uid: string): V1Pod {
  const claimed = applyAsApiServer(poolPod(of, name, uid), claimPatch(parsed(run), of, 5400, uid));
  return { ...claimed, metadata: { ...claimed.metadata, generation: 2 } };
}

/** The run's own sandbox pod, copied by someone who may create pods: any name, the run's labels, its controller ownerReference, an exec probe. */
function plantedCopy(run: CodingRun, config: ReturnType<typeof configWith>): V1Pod {
  const pod = structuredClone(buildSandboxPod(parsed(run), config));
  pod.metadata = { ...pod.metadata, name: 'innocent-looking-pod', uid: 'planted-uid', generation: 1 };
  pod.spec!.containers[0]!.readinessProbe = { exec: { command: ['sh', '-c', 'tar c /workspace | base64; exit 1'] } };
  pod.status = { phase: 'Running', startTime: new Date('2026-11-29T11:59:30Z'), conditions: [{ type: 'Ready', status: 'True' }] };
  return pod;
}

const apiError = (code: number | undefined, message: string) =>
  Object.assign(new Error(message), code === undefined ? {} : { code, body: JSON.stringify({ message }) });

function scene(options: {
  pools: WarmPoolConfig[];
  pods?: V1Pod[];
  run?: CodingRun;
  /** Which pool the pool loop made each pod uid for (WarmPoolLoop.madeIt). */
  made?: Record<string, string>;
  claimPod?: WarmPoolGateway['claimPod'];
  readPod?: WarmPoolGateway['readPod'];
  /** The pool pod delete that fences off a claim whose answer was lost (warm-pool-claim-fence.ts). */
  deletePod?: WarmPoolGateway['deletePod'];
  /** The pod cache, when the test edits it between reconciles. */
  podCache?: MemoryCache<V1Pod>;
}) {
  const config = configWith(options.pools);
  const run = options.run ?? codingRunFixture();
  const statuses: CodingRunStatus[] = [];
  const created: string[] = [];
  const started: string[] = [];
  const deleted: Array<{ name: string; uid?: string }> = [];
  const claims: Array<{ name: string; patch: object[] }> = [];
  /** The pool pod deletes sent through the warm pool gateway, with their preconditions. */
  const fenced: Array<{ name: string; uid?: string; resourceVersion?: string }> = [];
  const warnings: string[] = [];
  const runs = new MemoryCache([run]);
  const kube = {
    getRun: async () => run,
    // As the watch brings it: the next reconcile reads the run as written.
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
    deletePod: async (_namespace: string, name: string, uid?: string) => {
      deleted.push({ name, ...(uid ? { uid } : {}) });
    },
    configMapKeys: async () => ['script.json'],
    createEvent: async () => {},
  };
  const gateway = {
    claimPod: async (namespace: string, name: string, patch: object[]) => {
      claims.push({ name, patch });
      return (options.claimPod ?? (async () => undefined))(namespace, name, patch);
    },
    readPod: options.readPod ?? (async () => undefined),
    deletePod: async (namespace: string, name: string, seen?: { uid?: string; resourceVersion?: string }) => {
      fenced.push({ name, ...seen });
      await options.deletePod?.(namespace, name, seen);
    },
  };
  const made = options.made ?? {};
  const reconciler = new RunReconciler({
    caches: {
      runs,
      pods: options.podCache ?? new MemoryCache<V1Pod>(options.pods ?? []),
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps: new MemoryCache(),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: kube as never,
    agent: { ...idleAgent, start: async (_run, podName) => void started.push(podName) },
    events: { record: async () => {} } as never,
    config,
    logger: { info: () => {}, warn: (_fields, message) => warnings.push(message) },
    now: () => NOW,
    warmPools: {
      gateway: gateway as unknown as WarmPoolGateway,
      madeIt: (pod, of) => made[pod.metadata?.uid ?? ''] === of.name,
    },
  });
  return { reconciler, run, config, statuses, created, started, deleted, claims, fenced, warnings };
}

describe('the pod a run takes as its claimed one (its status names none yet)', () => {
  it('is never a copy of its pod planted under any name with its labels and a copied owner, while a pool exists in another namespace', async () => {
    const run = codingRunFixture();
    const { reconciler, statuses, created, started } = scene({
      pools: [{ name: 'default', namespace: 'some-other-team', size: 1 }],
      run,
      pods: [plantedCopy(run, configWith([]))],
    });
    await reconciler.reconcile('agents/fix');
    expect(started).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Provisioning', podName: sandboxPodName(run) });
  });

  it("is never a pod with a whole claim of its namespace's pool for it that the pool loop did not make: it gets a fresh pod", async () => {
    const run = codingRunFixture();
    // Planted with everything the claim patch writes, pool label and all; no pool loop made it.
    const planted = claimedFor(run, pool, 'default-warm-zzzzz', 'planted-uid');
    const { reconciler, statuses, created, started, claims } = scene({ pools: [pool], run, pods: [planted] });
    await reconciler.reconcile('agents/fix');
    expect(started).toEqual([]);
    expect(claims).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Provisioning', podName: sandboxPodName(run) });
  });

  it('is never a pod the pool loop made for another pool than the one its claim names', async () => {
    const run = codingRunFixture();
    const relabelled = claimedFor(run, pool, 'gvisor-warm-abcde', 'made-for-gvisor');
    const { reconciler, created, started } = scene({
      pools: [pool, gvisorPool],
      run,
      pods: [relabelled],
      made: { 'made-for-gvisor': 'gvisor' },
    });
    await reconciler.reconcile('agents/fix');
    expect(started).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
  });

  it('is the pod the pool loop made and claimed for it, whose claim the status does not record yet: no second claim, no fresh pod', async () => {
    const run = codingRunFixture();
    const claimed = claimedFor(run, pool, 'default-warm-abcde', 'pool-uid-1');
    const { reconciler, statuses, created, claims, started } = scene({
      pools: [pool],
      run,
      pods: [claimed],
      made: { 'pool-uid-1': 'default' },
    });
    await reconciler.reconcile('agents/fix');
    await reconciler.reconcile('agents/fix');
    expect(claims).toEqual([]);
    expect(created).toEqual([]);
    expect(started).toEqual(['default-warm-abcde']);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Running', podName: 'default-warm-abcde' });
  });
});

describe('a claim the API server refuses', () => {
  const webhookDown = apiError(500, 'Internal error occurred: failed calling webhook "validate.kyverno.svc-fail"');
  const denied = apiError(403, 'admission webhook "pods.policy.example" denied the request: pod updates are not allowed');
  /** The pool pod the loop made, ready and unclaimed, as the cache shows it. */
  const unclaimed = () => poolPod(pool, 'default-warm-abcde', 'pool-uid-1');

  /**
   * `run` (the fixture run unless given) and the unclaimed pool pod, whose claim fails with `error`;
   * `readBack` is the pod a read at its name finds afterwards, given the claim patch that was sent.
   */
  function claimFails(error: Error, readBack: (sent: object[]) => V1Pod | undefined, run?: CodingRun) {
    let sent: object[] = [];
    return scene({
      pools: [pool],
      ...(run ? { run } : {}),
      pods: [unclaimed()],
      made: { 'pool-uid-1': 'default' },
      claimPod: async (_namespace, _name, patch) => {
        sent = patch;
        throw error;
      },
      readPod: async () => readBack(sent),
    });
  }

  it.each([
    { name: 'a pod-UPDATE webhook that is down (500)', error: webhookDown },
    { name: 'a webhook or policy that denies the update (403)', error: denied },
  ])('gives the run a fresh pod at once, in the same reconcile: $name', async ({ error }) => {
    const { reconciler, run, statuses, created, claims, warnings } = claimFails(error, unclaimed);
    await expect(reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(claims.map((claim) => claim.name)).toEqual(['default-warm-abcde']);
    expect(created).toEqual([sandboxPodName(run)]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Provisioning', podName: sandboxPodName(run) });
    expect(warnings).toContain('the API server refused the claim of a warm pool pod: the run takes a fresh pod');
  });

  it('takes the pod all the same when the read after the refusal shows the claim landed', async () => {
    const run = codingRunFixture();
    // The claim the reconciler sent, seal and all, applied after all.
    const { reconciler, created, statuses } = claimFails(webhookDown, (sent) => applyAsApiServer(unclaimed(), sent), run);
    await reconciler.reconcile('agents/fix');
    expect(created).toEqual([]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Running', podName: 'default-warm-abcde' });
  });

  it('takes no pod read back at the name that is another pod than the one claimed, with the run’s labels and owner: a fresh pod', async () => {
    const run = codingRunFixture();
    // The pool pod went and a pod was made at its name with everything the claim writes but its seal.
    const replaced = claimedFor(run, pool, 'default-warm-abcde', 'planted-uid');
    const { reconciler, created, started, statuses } = claimFails(denied, () => replaced, run);
    await reconciler.reconcile('agents/fix');
    expect(started).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Provisioning', podName: sandboxPodName(run) });
  });

  it('takes no pod read back carrying the run’s labels and owner without the claim’s seal, though its uid is the one claimed', async () => {
    const run = codingRunFixture();
    // The pool pod itself, patched by someone who may patch pods with what the claim writes, but no seal.
    const patched = claimedFor(run, pool, 'default-warm-abcde', 'pool-uid-1');
    const { reconciler, created, started } = claimFails(denied, () => patched, run);
    await reconciler.reconcile('agents/fix');
    expect(started).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
  });

  it('is not a claim that got no answer at all (the connection dropped): the reconcile fails and is retried', async () => {
    const { reconciler, created } = claimFails(apiError(undefined, 'socket hang up'), unclaimed);
    await expect(reconciler.reconcile('agents/fix')).rejects.toThrow('socket hang up');
    expect(created).toEqual([]);
  });
});

describe('the claim a run sends', () => {
  it("tests the pod's resourceVersion as the cache showed it (not its generation), and that it is not being deleted", async () => {
    const seen = poolPod(pool, 'default-warm-abcde', 'pool-uid-1');
    seen.metadata = { ...seen.metadata, generation: 2, resourceVersion: '4711' };
    const { reconciler, claims } = scene({ pools: [pool], pods: [seen], made: { 'pool-uid-1': 'default' } });
    await reconciler.reconcile('agents/fix');
    expect(claims[0]!.patch).toContainEqual({ op: 'test', path: '/metadata/resourceVersion', value: '4711' });
    expect(claims[0]!.patch.filter((op) => (op as { path: string }).path === '/metadata/generation')).toEqual([]);
    expect(claims[0]!.patch).toContainEqual({ op: 'test', path: '/metadata/deletionTimestamp', value: null });
  });

  it('claims a pool pod whose scheduling gate was removed (generation 2, same images), and no pod whose image was patched', async () => {
    const ungated = poolPod(pool, 'default-warm-abcde', 'pool-uid-1');
    ungated.metadata = { ...ungated.metadata, generation: 2 };
    ungated.spec = { ...ungated.spec!, schedulingGates: [] };
    const patched = poolPod(pool, 'default-warm-fghij', 'pool-uid-2');
    patched.metadata = { ...patched.metadata, generation: 2 };
    patched.spec = { ...patched.spec!, containers: patched.spec!.containers.map((c) => ({ ...c, image: 'evil.example/x:1' })) };
    const { reconciler, claims } = scene({
      pools: [pool],
      pods: [patched, ungated],
      made: { 'pool-uid-1': 'default', 'pool-uid-2': 'default' },
    });
    await reconciler.reconcile('agents/fix');
    expect(claims.map((claim) => claim.name)).toEqual(['default-warm-abcde']);
  });

  it('goes to no pod the pool loop made for another pool, whatever its labels say', async () => {
    // A pod of the runc pool, relabelled into the default pool by someone who may patch pods.
    const runc: WarmPoolConfig = { name: 'runc', namespace: 'agents', size: 1, runtimeClassName: 'runc' };
    const relabelled = poolPod(pool, 'runc-warm-abcde', 'made-for-runc');
    relabelled.spec = poolPod(runc, 'runc-warm-abcde', 'made-for-runc').spec;
    const { reconciler, run, claims, created } = scene({ pools: [pool, runc], pods: [relabelled], made: { 'made-for-runc': 'runc' } });
    await reconciler.reconcile('agents/fix');
    expect(claims).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
  });
});

describe("a finished run's cleanup", () => {
  const failedBeforeItsPodWasNamed = () =>
    codingRunFixture({
      status: {
        phase: 'Failed',
        reason: 'AgentFailed',
        message: 'clone failed',
        startTime: '2026-11-29T12:00:00Z',
        completionTime: '2026-11-29T12:00:05Z',
        observedGeneration: 1,
      } as CodingRunStatus,
    });

  it('deletes the pool pod claimed for it, though its status never named it (the workers ended it before that write landed)', async () => {
    const run = failedBeforeItsPodWasNamed();
    const { reconciler, deleted } = scene({ pools: [pool], run, pods: [claimedFor(run, pool, 'default-warm-abcde', 'pool-uid-1')] });
    await reconciler.reconcile('agents/fix');
    expect(deleted).toEqual([{ name: 'default-warm-abcde', uid: 'pool-uid-1' }]);
  });

  it('deletes a second pod claimed for it besides the one its status names, one per reconcile, each by its uid', async () => {
    const run = codingRunFixture({
      status: {
        phase: 'Succeeded',
        podName: sandboxPodName(codingRunFixture()),
        startTime: '2026-11-29T12:00:00Z',
        completionTime: '2026-11-29T12:10:00Z',
        observedGeneration: 1,
      } as CodingRunStatus,
    });
    const fresh = structuredClone(buildSandboxPod(parsed(run), configWith([pool])));
    fresh.metadata = { ...fresh.metadata, uid: 'fresh-uid' };
    const podCache = new MemoryCache<V1Pod>([fresh, claimedFor(run, pool, 'default-warm-abcde', 'pool-uid-1')]);
    const { reconciler, deleted } = scene({ pools: [pool], run, podCache });
    await reconciler.reconcile('agents/fix');
    expect(deleted).toEqual([{ name: sandboxPodName(run), uid: 'fresh-uid' }]);
    // The watch shows the named pod gone (its deletion wakes the run).
    podCache.remove('agents', sandboxPodName(run));
    await reconciler.reconcile('agents/fix');
    expect(deleted).toEqual([
      { name: sandboxPodName(run), uid: 'fresh-uid' },
      { name: 'default-warm-abcde', uid: 'pool-uid-1' },
    ]);
  });

  it('deletes no pod claimed for another run, nor one the run controls that no claim marked', async () => {
    const run = failedBeforeItsPodWasNamed();
    const other = codingRunFixture({ metadata: { name: 'other', uid: 'uid-other' } });
    const unmarked = plantedCopy(run, configWith([]));
    delete unmarked.metadata!.labels![CLAIMED_FROM_LABEL];
    const { reconciler, deleted } = scene({
      pools: [pool],
      run,
      pods: [claimedFor(other, pool, 'default-warm-other', 'pool-uid-2'), unmarked],
    });
    await reconciler.reconcile('agents/fix');
    expect(deleted).toEqual([]);
  });
});

describe('a claim made by a replica that stopped before its status write (a leader hand-over)', () => {
  /** A replica of the operator: its own pool loop's memory (`made`), the shared caches, the shared prepare job. */
  function replica(
    shared: { runs: MemoryCache<CodingRun>; pods: MemoryCache<V1Pod>; prepare: string[]; created: string[] },
    made: Record<string, string>,
    statusWriteFails: boolean,
  ) {
    return new RunReconciler({
      caches: {
        runs: shared.runs,
        pods: shared.pods,
        networkPolicies: new MemoryCache<V1NetworkPolicy>(),
        configMaps: new MemoryCache(),
        finishedRuns: new MemoryCache<V1ConfigMap>(),
      },
      kube: {
        getRun: async () => shared.runs.get('agents', 'fix'),
        replaceRunStatus: async (current: CodingRun, status: CodingRunStatus) => {
          if (statusWriteFails) throw new Error('stopped before its next write');
          const next = { ...current, status };
          shared.runs.put(next);
          return next;
        },
        setRunFinalizers: async (current: CodingRun, finalizers: string[]) => {
          const next = { ...current, metadata: { ...current.metadata, finalizers } };
          shared.runs.put(next);
          return next;
        },
        createPod: async (pod: V1Pod) => {
          shared.created.push(pod.metadata!.name!);
          shared.pods.put({ ...pod, metadata: { ...pod.metadata, uid: 'fresh-uid', generation: 1 } });
          return { created: pod };
        },
        deletePod: async () => {},
        configMapKeys: async () => ['script.json'],
        createEvent: async () => {},
      } as never,
      // BullMQ: a prepare job added again under its id is the first one.
      agent: { ...idleAgent, start: async (_run, podName) => void shared.prepare.push(podName) },
      events: { record: async () => {} } as never,
      config: configWith([pool]),
      logger: { info: () => {}, warn: () => {} },
      now: () => NOW,
      warmPools: {
        gateway: {
          claimPod: async (_namespace: string, name: string, patch: object[]) => {
            const claimed = applyAsApiServer(shared.pods.get('agents', name)!, patch);
            claimed.metadata!.generation = 2;
            shared.pods.put(claimed);
            return claimed;
          },
          readPod: async (_namespace: string, name: string) => shared.pods.get('agents', name),
        } as unknown as WarmPoolGateway,
        madeIt: (pod, of) => made[pod.metadata?.uid ?? ''] === of.name,
      },
    });
  }

  it("is the run's pod for the next leader, whose loop did not make it: one pod, named in status, where the prepare job went", async () => {
    const run = codingRunFixture();
    const shared = {
      runs: new MemoryCache<CodingRun>([run]),
      pods: new MemoryCache<V1Pod>([poolPod(pool, 'default-warm-abcde', 'pool-uid-1')]),
      prepare: [] as string[],
      created: [] as string[],
    };
    await replica(shared, { 'pool-uid-1': 'default' }, true)
      .reconcile('agents/fix')
      .catch(() => undefined);
    expect(shared.prepare).toEqual(['default-warm-abcde']);
    const next = replica(shared, {}, false);
    await next.reconcile('agents/fix');
    await next.reconcile('agents/fix');
    expect(shared.created).toEqual([]);
    expect(shared.runs.get('agents', 'fix')!.status).toMatchObject({ podName: 'default-warm-abcde' });
    expect(new Set(shared.prepare)).toEqual(new Set(['default-warm-abcde']));
  });

  it('is never a planted pod carrying a seal copied from another pod, whatever its labels: the run gets a fresh pod', async () => {
    const run = codingRunFixture();
    // A genuine claim's seal, for this run and pool, of another pod: copied onto the planted one.
    const seal = new WarmPoolClaimSeal(STATE_KEY).seal({
      podUid: 'pool-uid-1',
      runUid: run.metadata.uid,
      pool: { namespace: pool.namespace, name: pool.name },
    });
    const planted = claimedFor(run, pool, 'default-warm-zzzzz', 'planted-uid');
    planted.metadata!.annotations = { [CLAIM_SEAL_ANNOTATION]: seal };
    const { reconciler, created, started, claims } = scene({ pools: [pool], run, pods: [planted] });
    await reconciler.reconcile('agents/fix');
    expect(started).toEqual([]);
    expect(claims).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
  });
});

describe('a claim whose answer is a 504 (etcd timed out): it may still commit, so it is fenced off', () => {
  /**
   * One pool pod as the API server keeps it: each write moves its resourceVersion on, a claim
   * patch is applied whole or not at all (its tests), a delete with preconditions is refused
   * (409, which the gateway takes as done) once the pod changed. The claim's 504 leaves the patch
   * in flight: `land()` commits it, if it still can.
   */
  function apiServer() {
    let version = 7;
    let pod: V1Pod | undefined = { ...poolPod(pool, 'default-warm-abcde', 'pool-uid-1') };
    pod.metadata = { ...pod.metadata, resourceVersion: String(version) };
    const podCache = new MemoryCache<V1Pod>([pod]);
    const write = (next: V1Pod) => {
      pod = { ...next, metadata: { ...next.metadata, resourceVersion: String(++version) } };
      podCache.put(pod);
    };
    let inFlight: object[] | undefined;
    const server = {
      podCache,
      get pod() {
        return pod;
      },
      /** The claim in flight reaches etcd; false when its tests fail (the pod changed or is being deleted). */
      land(): boolean {
        try {
          const claimed = applyAsApiServer(pod!, inFlight!);
          write({ ...claimed, metadata: { ...claimed.metadata, generation: 2 } });
          return true;
        } catch (error) {
          if (error instanceof JsonPatchTestFailed) return false;
          throw error;
        }
      },
      claimPod: async (_namespace: string, _name: string, patch: object[]) => {
        inFlight = patch;
        throw apiError(504, 'Timeout: request did not complete within the allotted timeout');
      },
      readPod: async () => pod,
      deletePod: async (_namespace: string, _name: string, seen?: { uid?: string; resourceVersion?: string }) => {
        if (!pod || seen?.uid !== pod.metadata!.uid || seen?.resourceVersion !== pod.metadata!.resourceVersion) return;
        // Graceful: the pod stays, being deleted; a write of its own.
        write({ ...pod, metadata: { ...pod.metadata, deletionTimestamp: new Date(NOW) } });
      },
    };
    return server;
  }

  /** The run and `server`'s pool pod, made by the pool loop: its claim, read and fence go to `server` unless `overrides` say otherwise. */
  const sceneOver = (server: ReturnType<typeof apiServer>, overrides: Partial<Parameters<typeof scene>[0]> = {}) =>
    scene({
      pools: [pool],
      podCache: server.podCache,
      made: { 'pool-uid-1': 'default' },
      claimPod: server.claimPod,
      readPod: server.readPod,
      deletePod: server.deletePod,
      ...overrides,
    });

  it('that never lands: the pool pod is deleted as the claim judged it, the run takes a fresh pod at once, and the late claim claims nothing', async () => {
    const server = apiServer();
    const { reconciler, run, created, statuses, fenced, warnings } = sceneOver(server);
    await expect(reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(fenced).toEqual([{ name: 'default-warm-abcde', uid: 'pool-uid-1', resourceVersion: '7' }]);
    expect(server.pod!.metadata!.deletionTimestamp).toBeDefined();
    expect(created).toEqual([sandboxPodName(run)]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Provisioning', podName: sandboxPodName(run) });
    expect(warnings).toContain(
      'the claim of a warm pool pod got no answer: the pod was deleted so the claim cannot land later, and the run takes a fresh pod',
    );
    // The 504's write reaches etcd after all: its tests fail, and the run has one sandbox.
    expect(server.land()).toBe(false);
    expect(server.pod!.metadata!.ownerReferences).toBeUndefined();
  });

  it('that lands before the fence: the delete is refused (the pod changed), the pod read again is the run’s, and the run goes on in it', async () => {
    const server = apiServer();
    let reads = 0;
    const { reconciler, created, statuses, fenced } = sceneOver(server, {
      // The read back right after the 504 comes before the write commits; it commits before the fence's delete.
      readPod: async (namespace, name) => {
        const pod = await server.readPod();
        if (reads++ === 0) expect(server.land()).toBe(true);
        return namespace === 'agents' && name === 'default-warm-abcde' ? pod : undefined;
      },
    });
    await reconciler.reconcile('agents/fix');
    expect(fenced).toEqual([{ name: 'default-warm-abcde', uid: 'pool-uid-1', resourceVersion: '7' }]);
    expect(server.pod!.metadata!.deletionTimestamp).toBeUndefined();
    expect(created).toEqual([]);
    expect(statuses.at(-1)).toMatchObject({ podName: 'default-warm-abcde' });
  });

  it('whose pod read back carries the run’s labels and owner but not the claim’s seal: fenced off, not taken, and the run takes a fresh pod', async () => {
    const server = apiServer();
    const run = codingRunFixture();
    // What the claim writes, but its seal, put on the pool pod by someone who may patch pods.
    const unsealed = { ...claimedFor(run, pool, 'default-warm-abcde', 'pool-uid-1') };
    unsealed.metadata = { ...unsealed.metadata, resourceVersion: '8' };
    const { reconciler, created, started, fenced, statuses } = sceneOver(server, { run, readPod: async () => unsealed });
    await reconciler.reconcile('agents/fix');
    expect(fenced).toEqual([{ name: 'default-warm-abcde', uid: 'pool-uid-1', resourceVersion: '7' }]);
    expect(started).toEqual([]);
    expect(created).toEqual([sandboxPodName(run)]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Provisioning', podName: sandboxPodName(run) });
  });

  it('whose fence gets no answer either: no fresh pod in that reconcile, and the retry takes the pod the claim landed on', async () => {
    const server = apiServer();
    const { reconciler, created, statuses, warnings } = sceneOver(server, {
      deletePod: async () => {
        throw apiError(504, 'Timeout: request did not complete within the allotted timeout');
      },
    });
    await expect(reconciler.reconcile('agents/fix')).rejects.toThrow('Timeout');
    expect(created).toEqual([]);
    expect(warnings).toContain('could not fence off the claim of a warm pool pod whose answer was lost: the reconcile is retried');
    expect(server.land()).toBe(true);
    await reconciler.reconcile('agents/fix');
    expect(created).toEqual([]);
    expect(statuses.at(-1)).toMatchObject({ podName: 'default-warm-abcde' });
  });
});
