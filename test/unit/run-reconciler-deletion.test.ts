// The reconciler applying a deletion's decision when its parts fail or the run changes under it:
// a stop of the agent that fails (Redis down) must not leave the sandbox pod running, and a run
// that another took the name of between two decisions is not decided on with the first one's
// memory of this reconcile.
import { describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryReconcilerScene } from '../support/memory-reconciler-scene.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);

const sandboxPod = (runUid: string): V1Pod => ({
  metadata: {
    name: 'fix-sandbox',
    namespace: 'agents',
    uid: 'pod-1',
    labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run-uid': runUid },
    ownerReferences: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: 'fix', uid: runUid, controller: true }],
  },
  status: { phase: 'Running' },
});

const conflict = () => Object.assign(new Error('Operation cannot be fulfilled: the object has been modified'), { code: 409 });

function scene(run: CodingRun, options: { pod?: V1Pod; agent?: Partial<RunAgent> } = {}) {
  return memoryReconcilerScene(run, { config, now: NOW, pods: options.pod ? [options.pod] : [], agent: options.agent });
}

const deleting = (status: CodingRun['status']) =>
  codingRunFixture({ metadata: { deletionTimestamp: '2026-11-29T11:59:30Z' }, status: { podName: 'fix-sandbox', ...status } });
const redisDown = () => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.7:6379'));

describe('a deletion whose stop of the agent fails (Redis down)', () => {
  it("deletes the sandbox pod anyway, so the model's processes do not run on, and fails the reconcile to try the stop again", async () => {
    const { reconciler, kube } = scene(deleting({ phase: 'Running' }), { pod: sandboxPod('uid-1'), agent: { stop: redisDown } });
    await expect(reconciler.reconcile('agents/fix')).rejects.toThrow(/ECONNREFUSED/);
    expect(kube.deletePod).toHaveBeenCalledWith('agents', 'fix-sandbox', 'pod-1');
    expect(kube.setRunFinalizers).not.toHaveBeenCalled();
  });

  it('keeps the finalizer until a stop succeeds, though nothing else of the run is left', async () => {
    const run = deleting({ phase: 'Running' });
    const failing = scene(run, { agent: { stop: redisDown } });
    await expect(failing.reconciler.reconcile('agents/fix')).rejects.toThrow(/ECONNREFUSED/);
    expect(failing.kube.setRunFinalizers).not.toHaveBeenCalled();
    const stopped = scene(run);
    await stopped.reconciler.reconcile('agents/fix');
    expect(stopped.kube.setRunFinalizers).toHaveBeenCalledWith(expect.objectContaining({ metadata: expect.anything() }), []);
  });

  it("leaves a finished run's pod for the retry when its stop fails, as before: only a deletion goes on past it", async () => {
    const finished = codingRunFixture({
      status: { phase: 'Failed', reason: 'Timeout', completionTime: '2026-11-29T11:59:30Z', observedGeneration: 1, podName: 'fix-sandbox' },
    });
    const { reconciler, kube } = scene(finished, { pod: sandboxPod('uid-1'), agent: { stop: redisDown } });
    await expect(reconciler.reconcile('agents/fix')).rejects.toThrow(/ECONNREFUSED/);
    expect(kube.deletePod).not.toHaveBeenCalled();
  });
});

describe('a run whose write met a conflict, the name now held by another run', () => {
  it("does not decide on the other run with this one's reconcile: it returns, and the watch queues the other", async () => {
    // A spec edit of a finished run: the decision writes only that it saw it (observedGeneration).
    const first = codingRunFixture({
      metadata: { uid: 'uid-old', generation: 2 },
      status: { phase: 'Succeeded', reason: 'Completed', completionTime: '2026-11-29T11:00:00Z', observedGeneration: 1 },
    });
    const { reconciler, kube } = scene(first);
    kube.replaceRunStatus.mockRejectedValueOnce(conflict());
    // Deleted and created again under the name meanwhile: a new run, not yet looked at.
    kube.getRun.mockResolvedValueOnce(codingRunFixture({ metadata: { uid: 'uid-new', generation: 1, finalizers: [] } }));
    await expect(reconciler.reconcile('agents/fix')).resolves.toEqual({});
    expect(kube.getRun).toHaveBeenCalledTimes(1);
    expect(kube.replaceRunStatus).toHaveBeenCalledTimes(1);
    expect(kube.setRunFinalizers).not.toHaveBeenCalled();
  });
});
