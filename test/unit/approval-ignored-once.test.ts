// A run waiting for approval is reconciled every AGENT_RECHECK_MS (15 s) for up to its
// approval.timeout (168 h): a chamvi.dev/approval annotation it cannot take (not JSON, or for an
// approval never asked) stays there, and each reconcile recorded another ApprovalIgnored Warning
// Event, 240 an hour, though the status did not change. The real RunReconciler hands what one
// decision ignored to the next; the caches and the API server are fakes.
import { describe, expect, it, vi } from 'vitest';
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { RunEvent } from '../../operator/src/reconcile/decision.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const KEY = 'agents/fix';
const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);

const waitingRun = (uid = 'uid-1') =>
  codingRunFixture({
    metadata: { uid, resourceVersion: '1', annotations: { 'chamvi.dev/approval': 'not json' } },
    spec: { approval: { tools: ['bash'], timeout: '168h' } },
    status: {
      phase: 'WaitingForApproval',
      startTime: '2026-11-29T11:58:00Z',
      podName: 'fix-sandbox',
      conditions: [
        { type: 'Accepted', status: 'True', reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:58:00Z' },
        { type: 'SandboxReady', status: 'True', reason: 'PodReady', message: 'ok', lastTransitionTime: '2026-11-29T11:58:30Z' },
      ],
      pendingApproval: { id: 's1-c1', toolName: 'bash', input: '{}', requestedAt: '2026-11-29T11:59:00Z' },
    } as CodingRun['status'],
  });

const sandboxPod = (runUid: string): V1Pod => ({
  metadata: {
    name: 'fix-sandbox',
    namespace: 'agents',
    uid: 'pod-1',
    labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run-uid': runUid },
    ownerReferences: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: 'fix', uid: runUid, controller: true }],
  },
  status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
});

/** The run waiting on approval s1-c1, its pod up, the agent parked; a clock the test moves 15 s at a time. */
function scene() {
  const runs = new MemoryCache<CodingRun>([waitingRun()]);
  const pods = new MemoryCache<V1Pod>([sandboxPod('uid-1')]);
  const recorded: RunEvent[] = [];
  let version = 1;
  let clock = new Date('2026-11-29T12:00:00Z').getTime();
  const kube = {
    getRun: vi.fn(async (namespace: string, name: string) => runs.get(namespace, name)),
    replaceRunStatus: vi.fn(async (run: CodingRun, status: CodingRun['status']) => {
      const stored = { ...run, metadata: { ...run.metadata, resourceVersion: String(++version) }, status };
      runs.put(stored);
      return stored;
    }),
  };
  const reconciler = new RunReconciler({
    caches: {
      runs,
      pods,
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps: new MemoryCache(),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: kube as unknown as KubeGateway,
    agent: { ...idleAgent, inspect: async () => ({ state: 'waiting', moving: false }) },
    events: { record: async (_run: CodingRun, event: RunEvent) => void recorded.push(event) } as unknown as EventRecorder,
    config,
    logger: { info: () => {}, warn: () => {} },
    now: () => new Date(clock),
  });
  /** The looks of `minutes` of waiting, one every 15 s. */
  const wait = async (minutes: number) => {
    for (let look = 0; look < minutes * 4; look++) {
      await reconciler.reconcile(KEY);
      clock += 15_000;
    }
  };
  const annotate = (value: string) => {
    const run = runs.get('agents', 'fix')!;
    runs.put({ ...run, metadata: { ...run.metadata, annotations: { 'chamvi.dev/approval': value } } });
  };
  return { reconciler, kube, runs, pods, recorded, wait, annotate };
}

const ignoredEvents = (events: RunEvent[]) => events.filter((event) => event.reason === 'ApprovalIgnored');

describe('an approval answer the run cannot take, left in its annotation', () => {
  it('is warned of once, not at every look while the run waits', async () => {
    const { recorded, wait } = scene();
    await wait(10);
    expect(ignoredEvents(recorded)).toEqual([
      { type: 'Warning', reason: 'ApprovalIgnored', message: expect.stringMatching(/is not JSON/) },
    ]);
  });

  it('is warned of once more when another bad answer is written over it', async () => {
    const { recorded, wait, annotate } = scene();
    await wait(1);
    annotate(JSON.stringify({ id: 's9-c9', decision: 'approve' }));
    await wait(5);
    expect(ignoredEvents(recorded).map((event) => event.message)).toEqual([
      expect.stringMatching(/is not JSON/),
      'Ignored an answer for approval s9-c9: the pending one is s1-c1',
    ]);
  });

  it('is warned of by the decision made again after a status write met a conflict', async () => {
    const { kube, recorded, wait, runs } = scene();
    // The first look's status write (observedGeneration) meets a worker's write.
    kube.replaceRunStatus.mockImplementationOnce(async () => {
      throw Object.assign(new Error('the object has been modified'), { code: 409 });
    });
    await wait(1);
    expect(kube.replaceRunStatus).toHaveBeenCalled();
    expect(runs.get('agents', 'fix')?.status?.observedGeneration).toBe(1);
    expect(ignoredEvents(recorded)).toHaveLength(1);
  });

  it('is warned of again for a run created again under the name', async () => {
    const { recorded, wait, runs, pods } = scene();
    await wait(1);
    runs.put(waitingRun('uid-2'));
    pods.put(sandboxPod('uid-2'));
    await wait(1);
    expect(ignoredEvents(recorded)).toHaveLength(2);
  });
});
