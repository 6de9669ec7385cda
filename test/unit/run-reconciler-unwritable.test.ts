// A run the API server stops storing after it was accepted: its author, who may update
// codingruns, pads metadata.labels or annotations (no generation counts them) to just under
// etcd's 1.5 MiB, and the next status write is answered 500 "request is too large". The run must
// not keep a sandbox that nothing counts: the pod created for its admission, or the pod of a run
// already running, is deleted and its agent stopped before its slot is given back, the author is
// told why with a Warning Event, and the run is looked at again once it is trimmed.
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { RunEvent } from '../../operator/src/reconcile/decision.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], allowUnisolatedSandboxes: true, networkPolicy: false, maxActiveRuns: 1 },
  {},
);
const accepted = (): CodingRun['status'] => ({
  phase: 'Pending',
  reason: 'Queued',
  conditions: [
    { type: 'Accepted', status: 'True', reason: 'Valid', message: 'The run is valid.', lastTransitionTime: '2026-11-29T11:59:00Z' },
  ],
});
/** Stands for labels padded to just under etcd's limit: the fake API server refuses the run's status writes while it is there. */
const PAD = { pad: 'x'.repeat(63) };

/** etcd's answer to a write past --max-request-bytes, as the API server passes it on. */
function tooLarge(): Error {
  return Object.assign(new Error('request is too large'), { code: 500, body: { message: 'etcdserver: request is too large' } });
}

/** A reconciler over caches the fake API server keeps up to date, as the watches would. */
function cluster(runsAtStart: CodingRun[], pods: V1Pod[] = []) {
  const runs = new MemoryCache<CodingRun>(runsAtStart);
  const podCache = new MemoryCache<V1Pod>(pods);
  const events: Array<{ run: string; event: RunEvent }> = [];
  /** The most pods up at once, and every pod created. */
  const seen = { mostUp: pods.length, created: [] as string[], deleted: [] as string[] };
  let made = 0;
  const kube = {
    getRun: vi.fn(async (namespace: string, name: string) => runs.get(namespace, name)),
    replaceRunStatus: vi.fn(async (stored: CodingRun, written: CodingRun['status']) => {
      if (runs.get(stored.metadata.namespace, stored.metadata.name)?.metadata.labels?.pad) throw tooLarge();
      const next = { ...stored, status: written };
      runs.put(next);
      return next;
    }),
    setRunFinalizers: vi.fn(async (stored: CodingRun, finalizers: string[]) => ({
      ...stored,
      metadata: { ...stored.metadata, finalizers },
    })),
    createPod: vi.fn(async (pod: V1Pod) => {
      const created = { ...pod, metadata: { ...pod.metadata, uid: `pod-${++made}` }, status: { phase: 'Pending' } } as V1Pod;
      podCache.put(created);
      seen.created.push(created.metadata!.name!);
      seen.mostUp = Math.max(seen.mostUp, podCache.list().length);
      return { created };
    }),
    deletePod: vi.fn(async (namespace: string, name: string, uid?: string) => {
      const pod = podCache.get(namespace, name);
      if (!pod || (uid !== undefined && pod.metadata?.uid !== uid)) return;
      podCache.remove(namespace, name);
      seen.deleted.push(name);
    }),
    deleteNetworkPolicy: vi.fn(async () => {}),
    createEvent: vi.fn(async () => {}),
    configMapKeys: vi.fn(async () => undefined),
    secretKeysAndLabels: vi.fn(async () => undefined),
  };
  const agent = { ...idleAgent, stop: vi.fn<RunAgent['stop']>(async () => 0) };
  const woken: string[] = [];
  const reconciler = new RunReconciler({
    caches: {
      runs,
      pods: podCache,
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps: new MemoryCache(),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: kube as unknown as KubeGateway,
    agent,
    events: {
      record: async (run: CodingRun, event: RunEvent) => void events.push({ run: run.metadata.name, event }),
    } as unknown as EventRecorder,
    config,
    logger: { info: () => {}, warn: () => {} },
    now: () => NOW,
    wake: (key) => woken.push(key),
  });
  return { reconciler, runs, pods: podCache, kube, agent, events, seen, woken };
}

describe('a run padded past what the API server stores, after it was accepted', () => {
  const padded = () =>
    codingRunFixture({ metadata: { name: 'a', uid: 'uid-a', labels: PAD, creationTimestamp: '2026-11-29T11:59:00Z' }, status: accepted() });
  const next = () =>
    codingRunFixture({ metadata: { name: 'b', uid: 'uid-b', creationTimestamp: '2026-11-29T11:59:30Z' }, status: accepted() });

  it('has the pod created for its admission deleted, and the next run is given a pod only once none is up beside it', async () => {
    const world = cluster([padded(), next()]);
    await world.reconciler.reconcile('agents/a');
    await world.reconciler.reconcile('agents/b');
    expect(world.seen.mostUp).toBe(1);
    expect(world.seen.created).toHaveLength(2);
    expect(world.seen.deleted).toEqual([world.seen.created[0]]);
    expect(world.agent.stop).toHaveBeenCalled();
    expect(world.runs.get('agents', 'b')?.status?.phase).toBe('Provisioning');
  });

  it('keeps its slot while its pod cannot be deleted, and lets it go once the retry deletes it', async () => {
    const world = cluster([padded(), next()]);
    world.kube.deletePod.mockRejectedValueOnce(Object.assign(new Error('etcd leader changed'), { code: 503 }));
    await expect(world.reconciler.reconcile('agents/a')).rejects.toThrow(/etcd leader changed/);
    expect(world.pods.list()).toHaveLength(1);
    await world.reconciler.reconcile('agents/b');
    expect(world.seen.created).toHaveLength(1);
    expect(world.runs.get('agents', 'b')?.status?.reason).toBe('Queued');
    await world.reconciler.reconcile('agents/a');
    expect(world.pods.list()).toEqual([]);
    await world.reconciler.reconcile('agents/b');
    expect(world.seen.mostUp).toBe(1);
    expect(world.runs.get('agents', 'b')?.status?.phase).toBe('Provisioning');
  });

  it('tells its author with a Warning Event that the sandbox was removed and to trim its labels and annotations', async () => {
    const world = cluster([padded(), next()]);
    await world.reconciler.reconcile('agents/a');
    const warning = world.events.find(({ run, event }) => run === 'a' && event.type === 'Warning');
    expect(warning?.event.reason).toBe('InvalidSpec');
    expect(warning?.event.message).toMatch(/too large to store/);
    expect(warning?.event.message).toContain(`sandbox pod ${world.seen.created[0]} was deleted`);
    expect(warning?.event.message).toMatch(/trim its metadata\.labels and metadata\.annotations/);
  });

  it('is left alone while it stays as large, and looked at again once its labels are trimmed', async () => {
    const world = cluster([padded(), next()]);
    await world.reconciler.reconcile('agents/a');
    expect(await world.reconciler.reconcile('agents/a')).toEqual({ requeueAfterMs: 10 * 60_000 });
    expect(world.seen.created).toHaveLength(1);
    const trimmed = structuredClone(world.runs.get('agents', 'a')!);
    delete trimmed.metadata.labels;
    world.runs.put(trimmed);
    await world.reconciler.reconcile('agents/a');
    expect(world.seen.created).toHaveLength(2);
    expect(world.runs.get('agents', 'a')?.status?.phase).toBe('Provisioning');
  });
});

describe('a running run padded past what the API server stores', () => {
  const sandboxPod: V1Pod = {
    metadata: {
      name: 'fix-sandbox',
      namespace: 'agents',
      uid: 'pod-running',
      labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run-uid': 'uid-1' },
      ownerReferences: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: 'fix', uid: 'uid-1', controller: true }],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  };
  const running = codingRunFixture({
    metadata: { labels: PAD, annotations: { [CANCEL_ANNOTATION]: 'stop' } },
    status: {
      phase: 'Running',
      podName: 'fix-sandbox',
      startTime: '2026-11-29T11:59:10Z',
      observedGeneration: 1,
      conditions: accepted()!.conditions!,
    },
  });

  it('loses its pod and its agent when the status that cancels it cannot be written', async () => {
    const world = cluster([running], [sandboxPod]);
    await world.reconciler.reconcile('agents/fix');
    // The first look starts taking the diff; its end wakes the run, decided on with it.
    await vi.waitFor(() => expect(world.woken).toContain('agents/fix'));
    await world.reconciler.reconcile('agents/fix');
    expect(world.kube.replaceRunStatus).toHaveBeenCalled();
    expect(world.kube.deletePod).toHaveBeenCalledWith('agents', 'fix-sandbox', 'pod-running');
    expect(world.pods.list()).toEqual([]);
    expect(world.agent.stop).toHaveBeenCalled();
  });

  it('ends, once trimmed, saying the operator took its sandbox down for the refused writes, not that its pod disappeared', async () => {
    // No cancel: the write refused is the one that records its ready sandbox (SandboxReady).
    const working = structuredClone(running);
    delete working.metadata.annotations;
    const world = cluster([working], [sandboxPod]);
    await world.reconciler.reconcile('agents/fix');
    expect(world.pods.list()).toEqual([]);
    expect(world.agent.stop).toHaveBeenCalled();
    const trimmed = structuredClone(world.runs.get('agents', 'fix')!);
    delete trimmed.metadata.labels;
    world.runs.put(trimmed);
    await world.reconciler.reconcile('agents/fix');
    // The ending keeps the last snapshot's diff first; its end wakes the run, decided on with it.
    await vi.waitFor(() => expect(world.woken).toContain('agents/fix'));
    await world.reconciler.reconcile('agents/fix');
    const status = world.runs.get('agents', 'fix')?.status;
    expect(status?.phase).toBe('Failed');
    expect(status?.reason).toBe('InvalidSpec');
    expect(status?.message).not.toMatch(/disappeared/);
    expect(status?.message).toMatch(/The operator deleted sandbox pod fix-sandbox and stopped the run's agent/);
    expect(status?.message).toMatch(/the API server refused every write of this run, which was \d+ KiB/);
    expect(status?.message).toMatch(/cannot go on/);
  });

  it('ends saying so too when the delete of its pod landed but its answer was lost, and the retry found the pod deleting', async () => {
    const working = structuredClone(running);
    delete working.metadata.annotations;
    const world = cluster([working], [sandboxPod]);
    world.kube.deletePod.mockImplementationOnce(async (namespace: string, name: string) => {
      const pod = world.pods.get(namespace, name)!;
      world.pods.put({ ...pod, metadata: { ...pod.metadata, deletionTimestamp: NOW } });
      throw Object.assign(new Error('the connection was reset'), { code: 'ECONNRESET' });
    });
    await expect(world.reconciler.reconcile('agents/fix')).rejects.toThrow(/connection was reset/);
    // The retry: refused again, its pod already going, so this teardown deletes none.
    await world.reconciler.reconcile('agents/fix');
    world.pods.remove('agents', 'fix-sandbox');
    const trimmed = structuredClone(world.runs.get('agents', 'fix')!);
    delete trimmed.metadata.labels;
    world.runs.put(trimmed);
    await world.reconciler.reconcile('agents/fix');
    await vi.waitFor(() => expect(world.woken).toContain('agents/fix'));
    await world.reconciler.reconcile('agents/fix');
    const status = world.runs.get('agents', 'fix')?.status;
    expect(status?.reason).toBe('InvalidSpec');
    expect(status?.message).toMatch(/The operator deleted sandbox pod fix-sandbox/);
  });

  it('ends as a lost sandbox when its pod was gone before the refused write: the operator took nothing down', async () => {
    const working = structuredClone(running);
    delete working.metadata.annotations;
    const world = cluster([working]);
    await world.reconciler.reconcile('agents/fix');
    await vi.waitFor(() => expect(world.woken).toContain('agents/fix'));
    await world.reconciler.reconcile('agents/fix');
    expect(world.kube.replaceRunStatus).toHaveBeenCalled();
    expect(world.kube.deletePod).not.toHaveBeenCalled();
    const trimmed = structuredClone(world.runs.get('agents', 'fix')!);
    delete trimmed.metadata.labels;
    world.runs.put(trimmed);
    const woken = world.woken.length;
    await world.reconciler.reconcile('agents/fix');
    await vi.waitFor(() => expect(world.woken.length).toBeGreaterThan(woken));
    await world.reconciler.reconcile('agents/fix');
    const status = world.runs.get('agents', 'fix')?.status;
    expect(status?.reason).toBe('SandboxLost');
    expect(status?.message).toMatch(/disappeared/);
  });
});
