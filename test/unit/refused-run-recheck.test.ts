// A run whose pod the API server refuses with a refusal that may clear (a ResourceQuota's 403)
// stays Pending/SandboxRefused and tries again every REFUSED_RECHECK_MS. Each try admits it
// again, so its status write carries a new status.admission; that write comes back through the
// run watch, and a wake for it ran the run again at once (a woken key does not wait for its
// delay): a pod create and a status write as fast as the API server answered. The real
// RunReconciler, WorkQueue and runChangeWakes, on fake timers; the API server and the watch are
// fakes, each answering 5 ms later.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { runChangeWakes } from '../../operator/src/controller/run-change-wakes.ts';
import { RunReconciler, type ReconcilerCaches } from '../../operator/src/controller/run-reconciler.ts';
import { WorkQueue } from '../../operator/src/controller/work-queue.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { REFUSED_RECHECK_MS } from '../../operator/src/reconcile/decide.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const KEY = 'agents/fix';
const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An accepted run, waiting for its slot, in a cluster whose ResourceQuota refuses every pod. */
function quotaScene() {
  const config = loadOperatorConfig(
    { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 10, allowUnisolatedSandboxes: true, networkPolicy: false },
    {},
  );
  let resourceVersion = 1;
  const runs = new Map<string, CodingRun>([
    [
      KEY,
      codingRunFixture({
        metadata: { resourceVersion: String(resourceVersion) },
        status: {
          phase: 'Pending',
          conditions: [
            {
              type: 'Accepted',
              status: 'True',
              reason: 'Valid',
              message: 'The run is valid.',
              lastTransitionTime: '2026-11-29T11:59:01Z',
              observedGeneration: 1,
            },
          ],
        } as CodingRun['status'],
      }),
    ],
  ]);
  const none = { get: () => undefined, list: () => [] };
  const caches = {
    runs: { get: (namespace: string, name: string) => runs.get(`${namespace}/${name}`), list: () => [...runs.values()] },
    pods: none,
    networkPolicies: none,
    configMaps: none,
    finishedRuns: none,
  } as unknown as ReconcilerCaches;
  const quota = Object.assign(new Error('forbidden'), {
    code: 403,
    body: { message: 'pods "fix-sandbox" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=4, limited: pods=4' },
  });
  const counts = { podCreates: 0, statusWrites: 0 };
  const kube = {
    async createPod() {
      counts.podCreates++;
      await later(5);
      throw quota;
    },
    async replaceRunStatus(run: CodingRun, status: CodingRun['status']) {
      counts.statusWrites++;
      await later(5);
      const stored = { ...run, metadata: { ...run.metadata, resourceVersion: String(++resourceVersion) }, status } as CodingRun;
      // The run watch: the write comes back a moment later, through the controller's filter.
      setTimeout(() => {
        const previous = runs.get(KEY);
        runs.set(KEY, stored);
        if (runChangeWakes(previous, stored)) queue.add(KEY);
      }, 5);
      return stored;
    },
  } as unknown as KubeGateway;
  const reconciler = new RunReconciler({
    caches,
    kube,
    agent: idleAgent,
    events: { record: async () => undefined } as unknown as EventRecorder,
    config,
    logger: { info: () => undefined, warn: () => undefined },
    wake: (key) => queue.add(key),
    now: () => new Date(),
  });
  const queue: WorkQueue = new WorkQueue((key) => reconciler.reconcile(key), { concurrency: 4 });
  return { queue, counts, run: () => runs.get(KEY)! };
}

describe('a run whose pod the API server refuses (a quota)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2026-11-29T12:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('tries again every REFUSED_RECHECK_MS, not as soon as its own status write comes back', async () => {
    const { queue, counts, run } = quotaScene();
    queue.add(KEY);
    // The first try refuses it (Pending/SandboxRefused, a change that wakes it), the second only
    // stamps a new admission: that write must not wake it.
    await vi.advanceTimersByTimeAsync(REFUSED_RECHECK_MS - 1_000);
    expect(run().status).toMatchObject({ phase: 'Pending', reason: 'SandboxRefused' });
    expect(counts.podCreates).toBeLessThanOrEqual(2);
    expect(counts.statusWrites).toBeLessThanOrEqual(2);
    const beforeRecheck = counts.podCreates;
    await vi.advanceTimersByTimeAsync(1_500);
    expect(counts.podCreates).toBe(beforeRecheck + 1);
    queue.stop();
  });
});
