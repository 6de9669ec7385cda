// The pool loop's bookkeeping between a claim and the watch that shows it: the pod cache is a
// plain list the test edits (as the informer would, later), the gateway records what the loop
// asks of the API server. What the loop decides from them is the unit under test.
import type { V1NetworkPolicy, V1Pod, V1PodStatus } from '@kubernetes/client-node';
import { describe, expect, it, vi } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { ObjectCache } from '../../operator/src/controller/run-reconciler.ts';
import { POOL_RESYNC_MS, WarmPoolLoop, isPoolPod } from '../../operator/src/controller/warm-pool-loop.ts';
import type { WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { UNWANTED_DELETE_LIMITS } from '../../operator/src/reconcile/warm-pool-unwanted-deletes.ts';
import {
  POOL_ISOLATION_LABEL,
  WARM_POOL_LABEL,
  claimPatch,
  warmPoolNetworkPolicy,
  type WarmPoolConfig,
} from '../../operator/src/reconcile/warm-pool.ts';
import { JsonPatchTestFailed, applyAsApiServer } from '../support/api-server-json-patch.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const pool: WarmPoolConfig = { name: 'pool', namespace: 'team', size: 2 };
// No NetworkPolicy here: what is under test is the pod count, not the pool's deny-all.
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], warmPools: [pool], networkPolicy: false }, {});

function listCache<T extends { metadata?: { name?: string; namespace?: string } }>(items: T[]): ObjectCache<T> {
  return {
    get: (namespace, name) => items.find((item) => item.metadata?.namespace === namespace && item.metadata?.name === name),
    list: () => items,
  };
}

/** A run of the pool's namespace, to claim a pool pod. */
function runNamed(name: string): ParsedCodingRun {
  const run = codingRunFixture({ metadata: { name, namespace: pool.namespace, uid: `uid-${name}` } });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

/** A pool pod once the claim patch of `run` reached it, as the API server applies it. */
const claimedBy = (pod: V1Pod, run: ParsedCodingRun): V1Pod => applyAsApiServer(pod, claimPatch(run, pool, 600, pod.metadata!.uid!));

function world(
  options: {
    pools?: WarmPoolConfig[];
    deleteMs?: number;
    admission?: (pod: V1Pod) => V1Pod;
    /** Awaited before each create is answered: a slow API server. */
    createAnswered?: () => Promise<void>;
    /** Whether the controller has listed each namespace (the loop's listed); absent, every one. */
    listed?: (namespace: string) => boolean;
    /** The API server's refusal of a pod delete, asked each time (after deleteMs): a 403 for as long as a RoleBinding is gone. */
    refuseDelete?: (namespace: string, name: string) => Error | undefined;
    /**
     * The loop's clock is Date.now, for tests whose fake timers fake Date too: a backoff of the
     * loop then ends as the fake timers advance. Absent, the clock moves only by advance().
     */
    clockFromTimers?: boolean;
  } = {},
) {
  let refusing: string | undefined;
  const pools = options.pools ?? [pool];
  const loopConfig = options.pools ? { ...config, warmPools: pools } : config;
  let now = 1_000_000;
  const pods: V1Pod[] = [];
  const created: V1Pod[] = [];
  const deleted: string[] = [];
  /** Each delete's preconditions, by pod name; the most deletes in flight at once; the deletes done at each create. */
  const seenAtDelete = new Map<string, { uid?: string; resourceVersion?: string } | undefined>();
  const deletes = { inFlight: 0, mostAtOnce: 0, doneAtCreate: [] as number[] };
  let next = 0;
  /** Every delete asked, by pod name, whatever its answer; the error the next one fails with. */
  const asked: string[] = [];
  let failNext: Error | undefined;
  const gateway: WarmPoolGateway = {
    async createPoolPod(pod) {
      if (options.createAnswered) await options.createAnswered();
      // As the API server answers a create over the namespace's ResourceQuota.
      if (pod.metadata?.namespace === refusing) throw new Error('pods "x" is forbidden: exceeded quota');
      const admitted = options.admission ? options.admission(pod) : pod;
      // As the API server makes it: a name, a uid, and generation 1 (a spec not changed since).
      const named = { ...admitted, metadata: { ...admitted.metadata, name: `made-${next}`, uid: `uid-made-${next++}`, generation: 1 } };
      created.push(named);
      deletes.doneAtCreate.push(deleted.length);
      return named;
    },
    claimPod: async () => undefined,
    readPod: async () => undefined,
    deletePod: async (namespace, name, seen) => {
      asked.push(name);
      const refused = options.refuseDelete?.(namespace, name);
      if (refused) {
        if (options.deleteMs) await new Promise((resolve) => setTimeout(resolve, options.deleteMs));
        throw refused;
      }
      if (failNext) {
        const error = failNext;
        failNext = undefined;
        throw error;
      }
      seenAtDelete.set(name, seen);
      deletes.mostAtOnce = Math.max(deletes.mostAtOnce, ++deletes.inFlight);
      // As a DELETE's round trip to the API server.
      if (options.deleteMs) await new Promise((resolve) => setTimeout(resolve, options.deleteMs));
      deletes.inFlight--;
      deleted.push(name);
    },
    createPoolNetworkPolicy: async (policy: V1NetworkPolicy) => policy,
  };
  // What the loop tells the sessions opened ahead: each keep's pod names, and whether all were closed.
  const sessions = { kept: [] as string[][], closedAll: false };
  const warnings: string[] = [];
  const loop = new WarmPoolLoop({
    ...(options.listed ? { listed: options.listed } : {}),
    config: loopConfig,
    gateway,
    pods: listCache(pods),
    networkPolicies: listCache(pools.map((each) => warmPoolNetworkPolicy(each))),
    logger: { info: () => {}, warn: (_fields, message) => warnings.push(message) },
    sessions: {
      keep: (refs) => sessions.kept.push(refs.map((ref) => `${ref.namespace}/${ref.name}/${ref.uid}`)),
      closeAll: () => (sessions.closedAll = true),
    },
    now: options.clockFromTimers ? () => Date.now() : () => now,
  });
  /** A pod of the cache, as the informer shows it: ready, in the pool. */
  const readyPod = (name: string): V1Pod => {
    const made = created.find((pod) => pod.metadata?.name === name)!;
    return {
      ...made,
      status: { phase: 'Running', startTime: new Date(now), conditions: [{ type: 'Ready', status: 'True' }] },
    };
  };
  return {
    pods,
    created,
    deleted,
    deletes,
    seenAtDelete,
    loop,
    readyPod,
    sessions,
    warnings,
    advance: (ms: number) => (now += ms),
    /** From now on the API server refuses pod creates in this namespace (its quota is full). */
    refuseCreatesIn: (namespace: string) => (refusing = namespace),
    asked,
    /** The next pod delete fails with this answer of the API server (its HTTP status). */
    failNextDelete: (code: number, message: string) => (failNext = Object.assign(new Error(message), { code })),
  };
}

describe('WarmPoolLoop', () => {
  it('makes no pod for a pool whose namespace has not listed, however long, and keeps the pool once it has', async () => {
    let teamBListed = false;
    const setAside: WarmPoolConfig = { name: 'pool', namespace: 'team-b', size: 2 };
    const { pods, created, loop, readyPod, warnings, advance } = world({
      pools: [pool, setAside],
      listed: (namespace) => namespace !== 'team-b' || teamBListed,
    });
    // Past the time a pod made and never seen is forgotten (and was made again), several times over.
    // The cache shows team's pods only: team-b's pod list is refused.
    for (let pass = 0; pass < 5; pass++) {
      await loop.pass();
      for (const pod of created.filter((each) => each.metadata?.namespace === 'team'))
        if (!pods.some((each) => each.metadata?.uid === pod.metadata?.uid)) pods.push(readyPod(pod.metadata!.name!));
      advance(40_000);
    }
    expect(created.map((pod) => pod.metadata?.namespace)).toEqual(['team', 'team']);
    expect(warnings.filter((message) => message.includes('cannot be listed'))).toHaveLength(1);
    teamBListed = true;
    await loop.pass();
    expect(created.filter((pod) => pod.metadata?.namespace === 'team-b')).toHaveLength(2);
  });

  it('deletes no pod with a pool label in a namespace that has not listed, and replaces it once it has', async () => {
    let teamBListed = false;
    const setAside: WarmPoolConfig = { name: 'pool', namespace: 'team-b', size: 2 };
    const { pods, deleted, loop } = world({ pools: [pool, setAside], listed: (namespace) => namespace !== 'team-b' || teamBListed });
    // The previous leader's pod: team-b's pod list worked, another of its lists was refused.
    pods.push({
      metadata: { name: 'predecessors', namespace: 'team-b', uid: 'uid-predecessors', labels: { [WARM_POOL_LABEL]: 'pool' } },
      status: { phase: 'Running' },
    });
    await loop.pass();
    expect(deleted).toEqual([]);
    teamBListed = true;
    await loop.pass();
    expect(deleted, 'not made by this loop: replaced').toEqual(['predecessors']);
  });

  it("counts, hands on and keeps no pod with the pool's labels that it did not make (planted, or its predecessor's): it replaces it", async () => {
    const { pods, created, deleted, loop, readyPod, sessions } = world();
    await loop.pass();
    pods.push(readyPod('made-0'));
    // Someone who may create pods in the namespace makes one with the pool's labels: their image, Ready.
    const planted = readyPod('made-1');
    pods.push({ ...planted, metadata: { ...planted.metadata, name: 'planted', uid: 'uid-planted' } });
    await loop.pass();
    expect(loop.madeIt(pods[1]!, pool)).toBe(false);
    expect(loop.madeIt(pods[0]!, pool)).toBe(true);
    expect(deleted).toEqual(['planted']);
    expect(sessions.kept.at(-1)).toEqual(['team/made-0/uid-made-0']);
    // Not counted: the pool still waits for made-1, its own second pod, and makes no third.
    expect(created).toHaveLength(2);
  });

  it("takes a pod it made for one pool and that someone relabelled into another for neither pool's: not counted, claimed or handed on there; replaced", async () => {
    const plain: WarmPoolConfig = { name: 'plain', namespace: 'team', size: 1, runtimeClassName: 'runc' };
    const gvisor: WarmPoolConfig = { name: 'gvisor', namespace: 'team', size: 1 };
    const { pods, created, deleted, loop, readyPod, sessions } = world({ pools: [plain, gvisor] });
    await loop.pass();
    const made = (poolName: string) =>
      readyPod(created.find((pod) => pod.metadata?.labels?.[WARM_POOL_LABEL] === poolName)!.metadata!.name!);
    pods.push(made('plain'), made('gvisor'));
    await loop.pass();
    expect(sessions.kept.at(-1)).toHaveLength(2);
    // kubectl label pod <plain's pod> chamvi.dev/warm-pool=gvisor chamvi.dev/warm-pool-sandbox=gvisor --overwrite
    const runcPod = pods[0]!;
    pods[0] = {
      ...runcPod,
      metadata: {
        ...runcPod.metadata,
        resourceVersion: 'relabelled',
        labels: { ...runcPod.metadata!.labels, [WARM_POOL_LABEL]: 'gvisor', [POOL_ISOLATION_LABEL]: 'gvisor' },
      },
    };
    // Neither the gvisor pool's pod by what it runs (its runtime class), nor one its loop made for it.
    expect(isPoolPod(pods[0], gvisor, config)).toBe(false);
    expect(loop.madeIt(pods[0], gvisor)).toBe(false);
    await loop.pass();
    // The plain pool refills; the gvisor pool keeps its own pod alone and hands only it on.
    expect(created.filter((pod) => pod.metadata?.labels?.[WARM_POOL_LABEL] === 'plain')).toHaveLength(2);
    expect(created.filter((pod) => pod.metadata?.labels?.[WARM_POOL_LABEL] === 'gvisor')).toHaveLength(1);
    expect(sessions.kept.at(-1)).toEqual([`team/${pods[1]!.metadata!.name}/${pods[1]!.metadata!.uid}`]);
    expect(deleted).toEqual([runcPod.metadata!.name]);
  });

  it('keeps knowing a pod it made once a run claimed it from its pool, for that pool alone, and forgets it once its claim is taken off', async () => {
    const { pods, loop, readyPod, advance } = world();
    await loop.pass();
    pods.push(readyPod('made-0'), readyPod('made-1'));
    await loop.pass();
    // Run A's claim, as the API server applies it: the deadline it sets is a change of the spec (generation 2).
    const claimed = claimedBy(pods[0]!, runNamed('run-a'));
    pods[0] = { ...claimed, metadata: { ...claimed.metadata, generation: 2 } };
    advance(31_000);
    await loop.pass();
    // The reconciler asks this of a run's claimed pod for as long as its status may not name it.
    expect(loop.madeIt(pods[0], pool)).toBe(true);
    expect(loop.madeIt(pods[0], { ...pool, name: 'other' })).toBe(false);
    // Its owner taken off: no claim of any run's, and no pool's pod either.
    pods[0] = { ...pods[0], metadata: { ...pods[0].metadata, ownerReferences: undefined } };
    await loop.pass();
    expect(loop.madeIt(pods[0], pool)).toBe(false);
  });

  it('counts, claims and hands on no pod of its pool whose image was patched in: it replaces it', async () => {
    const { pods, created, deleted, loop, readyPod, sessions, advance } = world();
    await loop.pass();
    pods.push(readyPod('made-0'), readyPod('made-1'));
    await loop.pass();
    // kubectl set image on a pool pod whose container has not started: the API server counts the change.
    const before = pods[0]!;
    pods[0] = {
      ...before,
      metadata: { ...before.metadata, generation: 2, resourceVersion: 'patched' },
      spec: { ...before.spec!, containers: before.spec!.containers.map((c) => ({ ...c, image: 'evil.example/sandbox:1' })) },
    };
    expect(isPoolPod(pods[0], pool, config)).toBe(false);
    await loop.pass();
    expect(sessions.kept.at(-1)).toEqual(['team/made-1/uid-made-1']);
    // Replaced once the pool's wait after a pod that changed since it was made is over.
    expect(created).toHaveLength(2);
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(3);
    expect(deleted).toEqual(['made-0']);
  });

  /** The pool of a custom image: its pods copy the toolbox in with an init container (chamvi-tools). */
  const customPool: WarmPoolConfig = { ...pool, image: 'registry.example/custom:1' };

  /** What a kubelet reports of a pod's init containers once they ran: each ran once, from `image` (its own), and exited 0. */
  const initRan = (pod: V1Pod, image?: string): V1PodStatus['initContainerStatuses'] =>
    (pod.spec!.initContainers ?? []).map((container) => {
      const ran = image ?? container.image!;
      return {
        name: container.name,
        image: ran,
        imageID: `${ran.split(':')[0]}@sha256:${'a'.repeat(64)}`,
        ready: true,
        restartCount: 0,
        state: { terminated: { exitCode: 0, reason: 'Completed' } },
      };
    });

  it('counts, claims and hands on no custom-image pool pod whose init container ran an image patched in and back: it replaces it', async () => {
    const { pods, created, deleted, loop, sessions, advance } = world({ pools: [customPool] });
    await loop.pass();
    const ready = (name: string, image?: string): V1Pod => {
      const made = created.find((pod) => pod.metadata?.name === name)!;
      return {
        ...made,
        status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], initContainerStatuses: initRan(made, image) },
      };
    };
    // made-0's chamvi-tools was patched to a rigged image while Pending, ran, and was patched back:
    // its spec is the built one again (generation 3), its status names what ran.
    const restored = ready('made-0', 'evil.example/rigged:1');
    pods.push({ ...restored, metadata: { ...restored.metadata, generation: 3 } }, ready('made-1'));
    expect(pods[0]!.spec).toEqual(created[0]!.spec);
    expect(isPoolPod(pods[0]!, customPool, config)).toBe(false);
    expect(isPoolPod(pods[1]!, customPool, config)).toBe(true);
    await loop.pass();
    expect(sessions.kept.at(-1)).toEqual(['team/made-1/uid-made-1']);
    expect(created).toHaveLength(2);
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(3);
    expect(deleted).toEqual(['made-0']);
  });

  it.each([
    { name: 'the default image', of: pool },
    { name: 'a custom image (an init container)', of: customPool },
  ])(
    'keeps pods whose scheduling gate was removed (generation 2, same images) across passes, claimable: no churn: $name',
    async ({ of }) => {
      // A Kueue-style webhook gates every new pod; its controller removes the gate, which bumps generation.
      const { pods, created, deleted, loop, advance, sessions } = world({
        pools: [of],
        admission: (pod) => ({ ...pod, spec: { ...pod.spec!, schedulingGates: [{ name: 'example.com/admission' }] } }),
      });
      for (let pass = 0; pass < 6; pass++) {
        await loop.pass();
        for (const made of created) {
          const index = pods.findIndex((pod) => pod.metadata?.name === made.metadata?.name);
          if (index >= 0 || deleted.includes(made.metadata!.name!)) continue;
          pods.push({
            ...made,
            metadata: { ...made.metadata, generation: 2, resourceVersion: '2' },
            spec: { ...made.spec!, schedulingGates: [], tolerations: [{ key: 'example.com/queue', operator: 'Exists' }] },
            status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], initContainerStatuses: initRan(made) },
          });
        }
        advance(POOL_RESYNC_MS);
      }
      expect(created).toHaveLength(of.size);
      expect(deleted).toEqual([]);
      expect(pods.filter((pod) => isPoolPod(pod, of, config) && loop.madeIt(pod, of))).toHaveLength(of.size);
      expect(sessions.kept.at(-1)).toEqual(['team/made-0/uid-made-0', 'team/made-1/uid-made-1']);
    },
  );

  it('deletes the unclaimed pods of a pool taken out of the config, and keeps its own and the claimed ones', async () => {
    const { pods, deleted, loop, readyPod } = world();
    await loop.pass();
    pods.push(readyPod('made-0'));
    const podOf = (name: string, namespace: string, poolName: string | undefined): V1Pod => {
      const base = readyPod('made-0');
      const labels = { ...base.metadata!.labels };
      if (poolName === undefined) delete labels[WARM_POOL_LABEL];
      else labels[WARM_POOL_LABEL] = poolName;
      return { ...base, metadata: { ...base.metadata, name, namespace, uid: `uid-${name}`, labels } };
    };
    pods.push(podOf('old-pool', 'team', 'renamed-away'), podOf('moved', 'elsewhere', 'pool'), podOf('claimed', 'team', undefined));
    await loop.pass();
    expect(deleted.sort()).toEqual(['moved', 'old-pool']);
  });

  it.each([
    ['a namespace with no pool', 'elsewhere'],
    ["the pool's own namespace, with its labels", 'team'],
  ])(
    'replaces a claimed pool pod within a pass while 500 pods planted in %s are deleted, a few at once, each once, all in the end',
    async (_where, namespace) => {
      vi.useFakeTimers();
      const { pods, created, deleted, deletes, seenAtDelete, loop, readyPod } = world({ deleteMs: 20 });
      try {
        await loop.pass();
        pods.push(readyPod('made-0'), readyPod('made-1'));
        // Someone who may create pods there plants 500 with the pool's labels (and so the operator's).
        const model = readyPod('made-0');
        for (let index = 0; index < 500; index++)
          pods.push({
            ...model,
            metadata: { ...model.metadata, namespace, name: `planted-${index}`, uid: `uid-planted-${index}`, resourceVersion: `${index}` },
          });
        loop.start();
        await vi.advanceTimersByTimeAsync(5);
        // A run claims a pool pod while the pass deletes planted pods.
        loop.claimed(pool, 'made-0');
        await vi.advanceTimersByTimeAsync(100);
        // Replaced by the pass right after that one, before one pass's share of deletes more.
        expect(created.map((pod) => pod.metadata?.name)).toEqual(['made-0', 'made-1', 'made-2']);
        expect(deletes.doneAtCreate.at(-1)).toBeLessThanOrEqual(UNWANTED_DELETE_LIMITS.perPass);
        expect(deleted.length).toBeLessThan(500);
        // The passes after go on at once; the cache still shows the pods asked, and none is asked twice.
        await vi.advanceTimersByTimeAsync(2_000);
        expect(new Set(deleted).size).toBe(500);
        expect(deleted).toHaveLength(500);
        expect(deletes.mostAtOnce).toBeGreaterThan(1);
        expect(deletes.mostAtOnce).toBeLessThanOrEqual(8);
        // Each as the cache showed it: a pod claimed or changed since is left alone.
        expect(seenAtDelete.get('planted-7')).toEqual({ uid: 'uid-planted-7', resourceVersion: '7' });
      } finally {
        loop.stop();
        vi.useRealTimers();
      }
    },
  );

  it('deletes unwanted pods a few per namespace and pass, asks each once while the cache shows it unchanged, and again once it changed', async () => {
    const { pods, deleted, loop, readyPod } = world();
    await loop.pass();
    const model = readyPod('made-0');
    const planted = (index: number, resourceVersion = '1'): V1Pod => ({
      ...model,
      metadata: { ...model.metadata, namespace: 'elsewhere', name: `planted-${index}`, uid: `uid-planted-${index}`, resourceVersion },
    });
    pods.push(...Array.from({ length: UNWANTED_DELETE_LIMITS.perNamespace + 5 }, (_, index) => planted(index)));
    await loop.pass();
    expect(deleted).toHaveLength(UNWANTED_DELETE_LIMITS.perNamespace);
    await loop.pass();
    expect(new Set(deleted).size).toBe(UNWANTED_DELETE_LIMITS.perNamespace + 5);
    await loop.pass();
    expect(deleted).toHaveLength(UNWANTED_DELETE_LIMITS.perNamespace + 5);
    // One changed since it was asked (a delete refused as stale, 409): asked again.
    pods[pods.findIndex((pod) => pod.metadata?.name === 'planted-3')] = planted(3, '2');
    await loop.pass();
    expect(deleted.at(-1)).toBe('planted-3');
    expect(deleted).toHaveLength(UNWANTED_DELETE_LIMITS.perNamespace + 6);
  });

  it.each([
    { answer: 'a timeout (500)', code: 500, asks: 2, deleted: ['planted'] },
    { answer: 'too many requests (429)', code: 429, asks: 2, deleted: ['planted'] },
    { answer: 'gone (404)', code: 404, asks: 1, deleted: [] },
    { answer: 'changed since (409)', code: 409, asks: 1, deleted: [] },
  ])(
    'after a delete of an unwanted pod answered $answer, asks again at the next pass only when it failed',
    async ({ code, asks, deleted: expected }) => {
      const { pods, deleted, asked, loop, readyPod, advance, failNextDelete } = world();
      await loop.pass();
      const model = readyPod('made-0');
      pods.push({
        ...model,
        metadata: { ...model.metadata, namespace: 'elsewhere', name: 'planted', uid: 'uid-planted', resourceVersion: '1' },
      });
      failNextDelete(code, code === 500 ? 'etcdserver: request timed out' : `answered ${code}`);
      await loop.pass();
      expect(asked).toEqual(['planted']);
      // The cache still shows the pod as it was; the timer's next pass.
      advance(POOL_RESYNC_MS);
      await loop.pass();
      expect(asked).toHaveLength(asks);
      expect(deleted).toEqual(expected);
    },
  );

  it('reaches, in the next pass, the namespaces after 40 whose planted pods are planted again as fast as they are deleted', async () => {
    const { pods, deleted, loop, readyPod } = world();
    await loop.pass();
    const model = readyPod('made-0');
    const planted = (index: number, name: string): V1Pod => ({
      ...model,
      metadata: { ...model.metadata, namespace: `ns-${String(index).padStart(2, '0')}`, name, uid: `uid-${name}`, resourceVersion: '1' },
    });
    pods.push(...Array.from({ length: 50 }, (_, index) => planted(index, `planted-${index}`)));
    await loop.pass();
    expect(deleted).toHaveLength(UNWANTED_DELETE_LIMITS.perPass);
    // Whoever planted them plants each deleted one again, in its place in the cache, before the next pass.
    for (const name of deleted) {
      const index = Number(name.slice('planted-'.length));
      pods[pods.findIndex((pod) => pod.metadata?.name === name)] = planted(index, `again-${index}`);
    }
    await loop.pass();
    const late = Array.from(
      { length: 50 - UNWANTED_DELETE_LIMITS.perPass },
      (_, offset) => `planted-${UNWANTED_DELETE_LIMITS.perPass + offset}`,
    );
    expect(deleted.slice(UNWANTED_DELETE_LIMITS.perPass)).toEqual(expect.arrayContaining(late));
  });

  it('waits longer after each round of pods that fail before they are ready, and makes pods again at once once one is ready', async () => {
    const { pods, created, loop, readyPod, advance, warnings } = world();
    const failed = (name: string): V1Pod => ({
      ...readyPod(name),
      status: { phase: 'Failed', conditions: [{ type: 'Ready', status: 'False' }] },
    });
    await loop.pass();
    expect(created).toHaveLength(2);
    // Both fail at start (a container that exits): replaced once, then the pool waits 2 s.
    pods.push(failed('made-0'), failed('made-1'));
    await loop.pass();
    expect(created).toHaveLength(2);
    expect(warnings).toContain('warm pool pods ended or stuck before they were ready; the pool waits before it makes more');
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(4);
    // They fail too: now 4 s.
    pods.splice(0, pods.length, failed('made-2'), failed('made-3'));
    await loop.pass();
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(4);
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(6);
    // One comes up: the count starts over, and a later failure waits 2 s again, not 8.
    pods.splice(0, pods.length, readyPod('made-4'), failed('made-5'));
    await loop.pass();
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(7);
  });

  it('goes on past a pool whose creates are refused (a full quota): the next pool refills, and the sessions are told of both', async () => {
    const full: WarmPoolConfig = { name: 'pool', namespace: 'full', size: 2 };
    const { pods, created, loop, readyPod, sessions, warnings, advance, refuseCreatesIn } = world({ pools: [full, pool] });
    await loop.pass();
    expect(created.map((pod) => `${pod.metadata?.namespace}/${pod.metadata?.name}`)).toEqual([
      'full/made-0',
      'full/made-1',
      'team/made-2',
      'team/made-3',
    ]);
    // One pod of each pool shows; the others never do. Then the full pool's quota fills.
    pods.push(readyPod('made-0'), readyPod('made-2'));
    refuseCreatesIn('full');
    advance(31_000);
    await loop.pass();
    expect(warnings).toEqual(['warm pool pass failed']);
    expect(created.map((pod) => pod.metadata?.name)).toEqual(['made-0', 'made-1', 'made-2', 'made-3', 'made-4']);
    expect(sessions.kept.at(-1)).toEqual(['full/made-0/uid-made-0', 'team/made-2/uid-made-2']);
  });

  it('tells the sessions opened ahead the ready pool pods: not one starting, not one it claimed; none once stopped', async () => {
    const { pods, loop, readyPod, created, sessions } = world();
    await loop.pass();
    expect(sessions.kept.at(-1)).toEqual([]);
    // made-0 is Ready, made-1 still starting.
    pods.push(readyPod('made-0'), { ...created[1]!, status: { phase: 'Pending' } });
    await loop.pass();
    expect(sessions.kept.at(-1)).toEqual(['team/made-0/uid-made-0']);
    pods[1] = readyPod('made-1');
    loop.claimed(pool, 'made-0');
    await loop.settled();
    expect(sessions.kept.at(-1)).toEqual(['team/made-1/uid-made-1']);
    loop.stop();
    expect(sessions.closedAll).toBe(true);
    const keeps = sessions.kept.length;
    loop.poke();
    await loop.settled();
    expect(sessions.kept).toHaveLength(keeps);
  });

  it('refills at once after a claim, though the cache still shows the claimed pod in the pool', async () => {
    const { pods, created, loop, readyPod } = world();
    await loop.pass();
    expect(created).toHaveLength(2);
    pods.push(readyPod('made-0'), readyPod('made-1'));
    await loop.pass();
    expect(created).toHaveLength(2);
    // Claimed; the watch has not brought the claim's label change yet.
    loop.claimed(pool, 'made-0');
    await loop.settled();
    expect(created.map((pod) => pod.metadata?.name)).toEqual(['made-0', 'made-1', 'made-2']);
  });

  it('does not count a claimed pod twice once the cache shows it out of the pool', async () => {
    const { pods, created, loop, readyPod } = world();
    await loop.pass();
    pods.push(readyPod('made-0'), readyPod('made-1'));
    loop.claimed(pool, 'made-0');
    await loop.settled();
    pods.push(readyPod('made-2'));
    // The claim reaches the cache: the pod has lost its pool label.
    const claimed = pods[0]!;
    pods[0] = { ...claimed, metadata: { ...claimed.metadata, labels: { ...claimed.metadata?.labels, [WARM_POOL_LABEL]: '' } } };
    await loop.pass();
    await loop.pass();
    expect(created).toHaveLength(3);
  });

  it('refills at once when a pod it made is claimed before any pass saw it in the pool', async () => {
    const { pods, created, loop, readyPod } = world();
    await loop.pass();
    expect(created).toHaveLength(2);
    // Both pods reach the cache and one is claimed, its label change too, all before the next pass.
    const claimed = readyPod('made-0');
    pods.push({ ...claimed, metadata: { ...claimed.metadata, labels: { ...claimed.metadata?.labels, [WARM_POOL_LABEL]: '' } } });
    pods.push(readyPod('made-1'));
    loop.claimed(pool, 'made-0');
    await loop.settled();
    // The pool holds one pod: the claimed one is neither in it nor still starting.
    expect(created.map((pod) => pod.metadata?.name)).toEqual(['made-0', 'made-1', 'made-2']);
  });

  it('forgets a claim the cache never shows after the expectation time, and counts the pod again', async () => {
    const { pods, created, loop, readyPod, advance } = world();
    await loop.pass();
    pods.push(readyPod('made-0'), readyPod('made-1'));
    loop.claimed(pool, 'made-0');
    await loop.settled();
    expect(created).toHaveLength(3);
    pods.push(readyPod('made-2'));
    advance(31_000);
    // Three pool pods in the cache for a pool of two: one is deleted, none created.
    await loop.pass();
    expect(created).toHaveLength(3);
  });

  it("keeps one pool's claim while another pool of the same namespace has its pass", async () => {
    const other: WarmPoolConfig = { name: 'other', namespace: 'team', size: 1 };
    const pods: V1Pod[] = [];
    const created: V1Pod[] = [];
    const gateway: WarmPoolGateway = {
      createPoolPod: async (pod) => {
        const named = { ...pod, metadata: { ...pod.metadata, name: `made-${created.length}`, uid: `uid-${created.length}` } };
        created.push(named);
        return named;
      },
      claimPod: async () => undefined,
      readPod: async () => undefined,
      deletePod: async () => undefined,
      createPoolNetworkPolicy: async (policy: V1NetworkPolicy) => policy,
    };
    const loop = new WarmPoolLoop({
      config: loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], warmPools: [pool, other], networkPolicy: false }, {}),
      gateway,
      pods: listCache(pods),
      networkPolicies: listCache([]),
      logger: { info: () => {}, warn: () => {} },
    });
    await loop.pass();
    expect(created).toHaveLength(3);
    const ready = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] };
    pods.push(...created.map((pod) => ({ ...pod, status: ready })));
    // The other pool's pod is claimed; the watch has not shown it yet. Its pass comes after this pool's.
    const otherPod = created.find((pod) => pod.metadata?.labels?.[WARM_POOL_LABEL] === 'other')!.metadata!.name!;
    loop.claimed(other, otherPod);
    await loop.settled();
    expect(created).toHaveLength(4);
    expect(created[3]!.metadata?.labels?.[WARM_POOL_LABEL]).toBe('other');
  });

  it.each([
    { told: 'told of the claim', tell: true, scrub: false },
    { told: 'never told of the claim (its answer lost)', tell: false, scrub: false },
    { told: 'told of the claim', tell: true, scrub: true },
  ])(
    'hands no run a pod claimed within 30 s of its creation and given the pool label back ($told, owner and run labels taken off: $scrub)',
    async ({ tell, scrub }) => {
      const { pods, created, deleted, loop, readyPod, sessions, advance } = world();
      await loop.pass();
      pods.push(readyPod('made-0'), readyPod('made-1'));
      await loop.pass();
      // Run A claims made-0, a few seconds old; its code leaves a daemon running in it.
      const claimed = claimedBy(pods[0]!, runNamed('run-a'));
      if (tell) loop.claimed(pool, 'made-0');
      pods[0] = claimed;
      await loop.settled();
      await loop.pass();
      // Refilled: the pool made a pod in its place.
      expect(created.map((pod) => pod.metadata?.name)).toEqual(['made-0', 'made-1', 'made-2']);
      pods.push(readyPod('made-2'));
      // A namespace member puts the pool's label back (and maybe takes off what else a patch can).
      const labels: Record<string, string> = { ...claimed.metadata!.labels!, [WARM_POOL_LABEL]: pool.name };
      if (scrub) for (const key of Object.keys(labels)) if (!(key in created[0]!.metadata!.labels!)) delete labels[key];
      pods[0] = {
        ...claimed,
        metadata: { ...claimed.metadata, labels, ...(scrub ? { ownerReferences: undefined } : {}), resourceVersion: 'relabelled' },
      };
      advance(31_000);
      await loop.pass();
      // Not a pod any run may claim (what claimWarmPod asks), nor one a session is opened in ahead.
      expect(isPoolPod(pods[0], pool, config) && loop.madeIt(pods[0], pool)).toBe(false);
      expect(sessions.kept.at(-1)).toEqual(['team/made-1/uid-made-1', 'team/made-2/uid-made-2']);
      // Not counted either: the pool, full without it, makes no pod and deletes none of its own.
      expect(created).toHaveLength(3);
      // Run B's claim, had it been sent from a cache that did not show the claim, fails at the API server.
      expect(() => applyAsApiServer(pods[0]!, claimPatch(runNamed('run-b'), pool, 600, 'uid-made-0'))).toThrow(JsonPatchTestFailed);
      // Run A still controls it: left to run A. Its owner taken off, it is no run's and no pool's: deleted.
      expect(deleted).toEqual(scrub ? ['made-0'] : []);
    },
  );

  it('makes no pod its pool could not claim (admission gave it a deadline) every pass: it waits, and replaces the one it made', async () => {
    const { pods, created, deleted, loop, advance, warnings } = world({
      admission: (pod) => ({ ...pod, spec: { ...pod.spec!, activeDeadlineSeconds: 3600 } }),
    });
    await loop.pass();
    expect(created).toHaveLength(1);
    expect(warnings.at(-1)).toMatch(/^admission changed the warm pool pod: \/spec\/activeDeadlineSeconds \(only a claim sets it\)/);
    pods.push({ ...created[0]!, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } });
    await loop.pass();
    expect(created).toHaveLength(1);
    expect(deleted).toEqual(['made-0']);
    expect(loop.madeIt(created[0]!, pool)).toBe(false);
    // 2 s later it tries again.
    advance(2_000);
    await loop.pass();
    expect(created).toHaveLength(2);
  });

  /** As EKS's pod-identity webhook (IRSA) admits every pod: a projected token volume, its mount and two variables in each container. */
  const irsa = (pod: V1Pod): V1Pod => ({
    ...pod,
    spec: {
      ...pod.spec!,
      volumes: [
        ...(pod.spec!.volumes ?? []),
        { name: 'aws-iam-token', projected: { sources: [{ serviceAccountToken: { audience: 'sts.amazonaws.com', path: 'token' } }] } },
      ],
      containers: pod.spec!.containers.map((container) => ({
        ...container,
        env: [
          ...(container.env ?? []),
          { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::1:role/x' },
          { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
        ],
        volumeMounts: [
          ...(container.volumeMounts ?? []),
          { name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount' },
        ],
      })),
    },
  });

  /** As the informer shows the pods: each created one not deleted yet, Pending; a deleted one gone. */
  const showCreated = (pods: V1Pod[], created: readonly V1Pod[], deleted: readonly string[]) => {
    for (const made of created)
      if (!deleted.includes(made.metadata!.name!) && !pods.some((pod) => pod.metadata?.name === made.metadata?.name))
        pods.push({ ...made, status: { phase: 'Pending' } });
    pods.splice(0, pods.length, ...pods.filter((pod) => !deleted.includes(pod.metadata!.name!)));
  };

  /** Passes every POOL_RESYNC_MS, the informer keeping up: the time between creates, and the most creates of one pass. */
  async function createWaits(w: ReturnType<typeof world>, count: number): Promise<{ waits: number[]; mostPerPass: number }> {
    const waits: number[] = [];
    let since = 0;
    let mostPerPass = 0;
    for (let step = 0; step < 1_000 && waits.length < count; step++) {
      w.advance(POOL_RESYNC_MS);
      since += POOL_RESYNC_MS;
      const before = w.created.length;
      await w.loop.pass();
      showCreated(w.pods, w.created, w.deleted);
      mostPerPass = Math.max(mostPerPass, w.created.length - before);
      if (w.created.length > before) {
        waits.push(since);
        since = 0;
      }
    }
    return { waits, mostPerPass };
  }

  it("judges a pod admission changed (IRSA) by the create's answer: deletes it at once, names the change and the fix, and waits longer after each, up to 5 min", async () => {
    const w = world({ admission: irsa });
    const { pods, created, deleted, loop, warnings } = w;
    await loop.pass();
    // One create, judged at once: not the pod the pool makes, so no second create in this pass.
    expect(created).toHaveLength(1);
    expect(deleted).toEqual(['made-0']);
    expect(loop.madeIt(created[0]!, pool)).toBe(false);
    const warning = warnings.find((each) => each.startsWith('admission changed the warm pool pod: '));
    expect(warning).toMatch(/volume aws-iam-token \(projected: service-account token, audience sts\.amazonaws\.com\)/);
    expect(warning).toMatch(/env AWS_ROLE_ARN/);
    expect(warning).toMatch(/eks\.amazonaws\.com\/role-arn/);
    expect(warning).toMatch(/chamvi\.dev\/warm-pool-sandbox/);
    // The cache shows the pod, its delete not seen yet: it is not asked again, nor logged as one planted.
    pods.push({ ...created[0]!, status: { phase: 'Pending' } });
    await loop.pass();
    expect(created).toHaveLength(1);
    expect(deleted).toEqual(['made-0']);
    expect(warnings).not.toContain('replaced pods with the pool label that this replica did not make');
    // 2 s, then 4, 8, ... every create changed again: one create per wait, none in between.
    const { waits, mostPerPass } = await createWaits(w, 10);
    expect(mostPerPass).toBe(1);
    expect(waits).toEqual([2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000]);
    expect(deleted).toHaveLength(created.length);
    expect(pods.filter((pod) => isPoolPod(pod, pool, config))).toEqual([]);
  });

  it('waits longer after each pod admission changed though older pods of the pool are ready (a webhook installed since), and no longer once one is not changed', async () => {
    let webhook = false;
    const sized: WarmPoolConfig = { ...pool, size: 3 };
    const w = world({ pools: [sized], admission: (pod) => (webhook ? irsa(pod) : pod) });
    const { pods, created, loop, readyPod } = w;
    await loop.pass();
    pods.push(readyPod('made-0'), readyPod('made-1'), readyPod('made-2'));
    await loop.pass();
    expect(created).toHaveLength(3);
    // The webhook is installed, and a run claims a pod: the pool makes one, changed, again and again.
    webhook = true;
    pods[0] = claimedBy(pods[0]!, runNamed('first'));
    const { waits, mostPerPass } = await createWaits(w, 5);
    expect(mostPerPass).toBe(1);
    expect(waits).toEqual([2_000, 2_000, 4_000, 8_000, 16_000]);
    // The webhook excludes the pool's pods: the next create is kept, and the pool makes pods at once again.
    webhook = false;
    const kept = await createWaits(w, 1);
    expect(loop.madeIt(created.at(-1)!, sized)).toBe(true);
    expect(kept.waits).toEqual([32_000]);
    const last = pods.findIndex((pod) => pod.metadata?.name === created.at(-1)!.metadata!.name);
    pods[last] = claimedBy(pods[last]!, runNamed('second'));
    expect((await createWaits(w, 1)).waits).toEqual([2_000]);
  });

  it("waits longer after each pod it made that stops being the pool's once started (its node names the image by a copy's name), though others are ready", async () => {
    const w = world({ pools: [customPool] });
    const { pods, created, deleted, loop, warnings } = w;
    // A tenant pulled the operator's image as docker.io/a/copy:1 on one node: containerd names it
    // so for every pod there. Every pod but the first lands there.
    let copyNode = true;
    const onCopyNode = new Set<string>();
    const show = () => {
      for (const made of created) {
        const name = made.metadata!.name!;
        if (deleted.includes(name) || pods.some((pod) => pod.metadata?.name === name)) continue;
        if (name !== 'made-0' && copyNode) onCopyNode.add(name);
        const ran = onCopyNode.has(name) ? 'docker.io/a/copy:1' : undefined;
        pods.push({
          ...made,
          status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], initContainerStatuses: initRan(made, ran) },
        });
      }
      pods.splice(0, pods.length, ...pods.filter((pod) => !deleted.includes(pod.metadata!.name!)));
    };
    const waits: number[] = [];
    let since = 0;
    const passUntilCreates = async (count: number) => {
      for (let step = 0; step < 1_000 && waits.length < count; step++) {
        w.advance(POOL_RESYNC_MS);
        since += POOL_RESYNC_MS;
        const before = created.length;
        await loop.pass();
        show();
        if (created.length > before) {
          waits.push(since);
          since = 0;
        }
      }
    };
    await loop.pass();
    show();
    expect(created).toHaveLength(2);
    await passUntilCreates(5);
    // made-0 stays ready and the pool's all along, and does not end the wait: each pod is seen
    // changed one pass (2 s) after it was made, then the pool waits 2 s doubling.
    expect(
      isPoolPod(
        pods.find((pod) => pod.metadata?.name === 'made-0')!,
        customPool,
        config,
      ),
    ).toBe(true);
    expect(waits).toEqual([4_000, 6_000, 10_000, 18_000, 34_000]);
    expect(deleted).toEqual(['made-1', 'made-2', 'made-3', 'made-4', 'made-5']);
    const warning = warnings.find((each) => each.startsWith("a warm pool pod this replica made stopped being the pool's pod"));
    expect(warning).toContain('pin sandboxImage to a digest');
    expect(warnings.some((each) => each.includes('did not make'))).toBe(false);
    // The copy is removed from the node: the pod made next is the pool's, and once it is ready the
    // pool makes pods at once again.
    copyNode = false;
    await passUntilCreates(6);
    expect(waits.at(-1)).toBe(66_000);
    const kept = created.at(-1)!;
    expect(loop.madeIt(kept, customPool)).toBe(true);
    await loop.pass();
    const index = pods.findIndex((pod) => pod.metadata?.name === kept.metadata!.name);
    pods[index] = claimedBy(pods[index]!, runNamed('first'));
    since = 0;
    await passUntilCreates(7);
    expect(waits.at(-1)).toBe(2_000);
  });

  it('sends no create or delete after stop() from the pass in progress, and settled() waits for the write on its way', async () => {
    // The API server holds the answer to the first create; it answers any later one at once.
    let answer: (() => void) | undefined;
    const { pods, created, asked, loop, readyPod } = world({
      createAnswered: () => (answer ? Promise.resolve() : new Promise<void>((resolve) => (answer = resolve))),
    });
    // A pod with the pool's labels that this loop did not make: the pass would delete it after the pool.
    loop.poke();
    while (!answer) await new Promise((resolve) => setTimeout(resolve, 0));
    const planted = { ...readyPod('made-0') };
    pods.push({ ...planted, metadata: { ...planted.metadata, name: 'planted', uid: 'uid-planted' } });
    // The lease is lost while the first of the pool's two creates is on its way.
    loop.stop();
    let settled = false;
    const settling = loop.settled().then(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(settled, 'the controller waits for the create on its way').toBe(false);
    answer();
    await settling;
    expect(created.map((pod) => pod.metadata?.name)).toEqual(['made-0']);
    expect(asked).toEqual([]);
  });

  it("keeps a pool's pod being deleted out of its count and its sessions while another pool has its pass", async () => {
    const small: WarmPoolConfig = { name: 'small', namespace: 'one', size: 1 };
    const shrinking: WarmPoolConfig = { name: 'shrinking', namespace: 'two', size: 2 };
    const pools = [small, shrinking];
    const { pods, created, deleted, loop, readyPod, sessions } = world({ pools });
    await loop.pass();
    expect(created.map((pod) => `${pod.metadata?.namespace}/${pod.metadata?.name}`)).toEqual(['one/made-0', 'two/made-1', 'two/made-2']);
    pods.push(readyPod('made-0'), readyPod('made-1'), readyPod('made-2'));
    // The second pool is sized down: one of its pods is deleted; the watch has not shown that yet.
    pools[1] = { ...shrinking, size: 1 };
    await loop.pass();
    expect(deleted).toEqual(['made-2']);
    // The next pass, the first pool's first: made-2 is not asked again, nor offered to a session.
    await loop.pass();
    expect(deleted).toEqual(['made-2']);
    expect(sessions.kept.at(-1)).toEqual(['one/made-0/uid-made-0', 'two/made-1/uid-made-1']);
    // The second pool's other pod is claimed: the pool holds none, made-2 being deleted, and makes one.
    loop.claimed(pools[1], 'made-1');
    await loop.settled();
    expect(created.map((pod) => `${pod.metadata?.namespace}/${pod.metadata?.name}`)).toEqual([
      'one/made-0',
      'two/made-1',
      'two/made-2',
      'two/made-3',
    ]);
  });

  it('asks no more deletes of unwanted pods after stop(), and settled() waits for those on their way', async () => {
    const { pods, asked, deletes, loop, readyPod } = world({ deleteMs: 20 });
    await loop.pass();
    const model = readyPod('made-0');
    for (let index = 0; index < UNWANTED_DELETE_LIMITS.perPass; index++)
      pods.push({
        ...model,
        metadata: { ...model.metadata, namespace: `ns-${index % 4}`, name: `planted-${index}`, uid: `uid-p-${index}` },
      });
    loop.poke();
    while (asked.length === 0) await new Promise((resolve) => setTimeout(resolve, 0));
    const onTheirWay = asked.length;
    loop.stop();
    await loop.settled();
    expect(onTheirWay).toBeGreaterThan(1);
    expect(asked).toHaveLength(onTheirWay);
    expect(deletes.inFlight).toBe(0);
  });

  /** A pod of a pool the config no longer has (`warmPools: []`), left by the previous leader: idle, it changes no more. */
  const leftover = (): V1Pod => ({
    metadata: { name: 'gone-warm-x', namespace: 'team', uid: 'uid-gone', resourceVersion: '5', labels: { [WARM_POOL_LABEL]: 'gone' } },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  });

  it('deletes the pods of a pool no longer configured once started with no pools, though the pod watch poked only while unlisted', async () => {
    let listed = false;
    const { pods, asked, deleted, loop } = world({ pools: [], listed: () => listed });
    try {
      // The pod informer's first list pokes for each pool pod, before the namespace counts as listed.
      pods.push(leftover());
      loop.poke();
      await loop.settled();
      expect(asked).toEqual([]);
      // Every cache has listed: the controller starts the loop. The idle pod brings no later event.
      listed = true;
      loop.start();
      await loop.settled();
      expect(deleted).toEqual(['gone-warm-x']);
    } finally {
      loop.stop();
    }
  });

  it('asks again for the delete of a pod no pool wants that failed, with no pools: after 2 s, then 4 s, not before', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const { pods, asked, deleted, loop, failNextDelete } = world({ pools: [], clockFromTimers: true });
    try {
      pods.push(leftover());
      failNextDelete(503, 'the server is currently unable to handle the request');
      loop.poke();
      await loop.settled();
      expect(asked).toEqual(['gone-warm-x']);
      failNextDelete(429, 'Too many requests');
      await vi.advanceTimersByTimeAsync(1_999);
      expect(asked, 'no pass at once after a failed delete').toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      await loop.settled();
      expect(asked).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(3_999);
      expect(asked).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(1);
      await loop.settled();
      expect(deleted).toEqual(['gone-warm-x']);
      // The watch brings the deletion: nothing is left, and no pass is asked for any more.
      pods.splice(0);
      await vi.advanceTimersByTimeAsync(8_000);
      await loop.settled();
      expect(vi.getTimerCount()).toBe(0);
      expect(asked).toHaveLength(3);
    } finally {
      loop.stop();
      vi.useRealTimers();
    }
  });

  /** A pod of a pool no longer configured in `namespace`, as the previous leader left it. */
  const leftoverIn = (namespace: string, name: string): V1Pod => ({
    metadata: { name, namespace, uid: `uid-${namespace}-${name}`, resourceVersion: '5', labels: { [WARM_POOL_LABEL]: 'gone' } },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  });
  /** As the API server answers a delete once the operator's RoleBinding in the namespace is deleted. */
  const forbiddenIn = (namespace: string) =>
    Object.assign(new Error(`pods is forbidden: User cannot delete resource "pods" in the namespace "${namespace}"`), { code: 403 });

  it.each([
    { pools: [], with: 'no pools' },
    { pools: [pool], with: 'a pool elsewhere' },
  ])(
    'asks at most one share of deletes per 2 s in a namespace whose deletes all fail, more pods there than a pass takes ($with)',
    async ({ pools }) => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
      const { pods, asked, loop } = world({
        pools,
        deleteMs: 1,
        refuseDelete: (namespace) => (namespace === 'blocked' ? forbiddenIn(namespace) : undefined),
        clockFromTimers: true,
      });
      try {
        pods.push(...Array.from({ length: UNWANTED_DELETE_LIMITS.perNamespace + 1 }, (_, index) => leftoverIn('blocked', `gone-${index}`)));
        loop.start();
        const elapsedMs = 5 * POOL_RESYNC_MS;
        await vi.advanceTimersByTimeAsync(elapsedMs);
        // One pass at start, then one per resync (pools) or per follow-up (none): never one right after another.
        expect(asked.length).toBeLessThanOrEqual(UNWANTED_DELETE_LIMITS.perNamespace * (elapsedMs / POOL_RESYNC_MS + 1));
      } finally {
        loop.stop();
        await vi.advanceTimersByTimeAsync(10);
        await loop.settled();
        vi.useRealTimers();
      }
    },
  );

  it("retries another namespace's failed delete after 2 s, with no pools, while one namespace's deletes have failed for long", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    let teamRefusals = 1;
    const { pods, asked, deleted, loop } = world({
      pools: [],
      clockFromTimers: true,
      refuseDelete: (namespace) =>
        namespace === 'blocked'
          ? forbiddenIn(namespace)
          : namespace === 'team' && teamRefusals-- > 0
            ? Object.assign(new Error('Too many requests'), { code: 429 })
            : undefined,
    });
    try {
      pods.push(leftoverIn('blocked', 'gone-blocked'));
      loop.start();
      // Long enough for that namespace's follow-ups to wait 5 minutes each.
      await vi.advanceTimersByTimeAsync(15 * 60_000);
      await loop.settled();
      expect(asked.length, 'the blocked namespace is asked again with backoff').toBeLessThan(15);
      // A pod of another namespace shows (its watch event pokes); its one delete fails.
      pods.push(leftoverIn('team', 'gone-team'));
      loop.poke();
      await loop.settled();
      expect(asked.filter((name) => name === 'gone-team')).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1_999);
      expect(
        asked.filter((name) => name === 'gone-team'),
        'not before 2 s',
      ).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      await loop.settled();
      expect(deleted).toEqual(['gone-team']);
    } finally {
      loop.stop();
      vi.useRealTimers();
    }
  });

  it.each([
    { pools: [], with: 'no pools' },
    { pools: [pool], with: 'a pool elsewhere' },
  ])(
    'asks at most one share of deletes in a namespace whose deletes all fail, though pod events poke 100 times within a second ($with)',
    async ({ pools }) => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
      const { pods, asked, loop } = world({
        pools,
        clockFromTimers: true,
        refuseDelete: (namespace) => (namespace === 'blocked' ? forbiddenIn(namespace) : undefined),
      });
      try {
        pods.push(...Array.from({ length: UNWANTED_DELETE_LIMITS.perNamespace + 1 }, (_, index) => leftoverIn('blocked', `gone-${index}`)));
        loop.start();
        await loop.settled();
        // Events of pool-labelled pods (anyone who may create or patch them sends these) poke the loop.
        for (let poke = 0; poke < 100; poke++) {
          loop.poke();
          await vi.advanceTimersByTimeAsync(9);
          await loop.settled();
        }
        expect(asked.length, 'one share, then nothing until its backoff ends').toBeLessThanOrEqual(UNWANTED_DELETE_LIMITS.perNamespace);
      } finally {
        loop.stop();
        await vi.advanceTimersByTimeAsync(10);
        await loop.settled();
        vi.useRealTimers();
      }
    },
  );

  it("retries a namespace's delete refused once (429) after its backoff, while another namespace's pods keep passes going one after another", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    let teamRefusals = 1;
    const busy = 3_000;
    const { pods, asked, deleted, loop } = world({
      pools: [],
      deleteMs: 10,
      clockFromTimers: true,
      refuseDelete: (namespace) =>
        namespace === 'team' && teamRefusals-- > 0 ? Object.assign(new Error('Too many requests'), { code: 429 }) : undefined,
    });
    try {
      pods.push(leftoverIn('team', 'gone-team'), ...Array.from({ length: busy }, (_, index) => leftoverIn('busy', `gone-${index}`)));
      loop.start();
      await vi.advanceTimersByTimeAsync(100);
      expect(asked.filter((name) => name === 'gone-team')).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(2_500);
      expect(deleted.length, "the busy namespace's passes still go on").toBeLessThan(busy);
      expect(deleted, 'asked again once its 2 s passed').toContain('gone-team');
      expect(asked.filter((name) => name === 'gone-team')).toHaveLength(2);
    } finally {
      loop.stop();
      await vi.advanceTimersByTimeAsync(20);
      await loop.settled();
      vi.useRealTimers();
    }
  });

  it('passes again after a pass during which it was poked, with no resync timer', async () => {
    let answer: (() => void) | undefined;
    const { sessions, loop } = world({
      createAnswered: () => (answer ? Promise.resolve() : new Promise<void>((resolve) => (answer = resolve))),
    });
    try {
      loop.poke();
      while (!answer) await new Promise((resolve) => setTimeout(resolve, 0));
      // A pod event during the pass: the only one that pod will bring.
      loop.poke();
      answer();
      await loop.settled();
      expect(sessions.kept, 'one pass for the first poke, one for the poke during it').toHaveLength(2);
    } finally {
      loop.stop();
    }
  });

  it('stays stopped when started after stop() (the lease lost while the caches filled): no timer, no pod', async () => {
    const { created, loop } = world();
    loop.stop();
    const setInterval = vi.spyOn(globalThis, 'setInterval');
    try {
      loop.start();
      await loop.settled();
      expect(setInterval.mock.calls.filter(([, ms]) => ms === POOL_RESYNC_MS)).toEqual([]);
      expect(created).toEqual([]);
    } finally {
      setInterval.mockRestore();
    }
  });
});
