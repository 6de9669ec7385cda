// A run deleted without its finalizer's cleanup whose jobs still run: its key is looked at every
// second until they end (run-reconciler.ts stopRunsGone). One log line says why the operator
// waits, for each such run, not one a second and not none.
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { ObjectMetadata } from '../../operator/src/kube/metadata-only.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowUnisolatedSandboxes: true, networkPolicy: false }, {});

/** A reconciler over empty caches (every run is gone) whose agent answers each stop with the next of `jobsLeft`. */
function reconcilerOfGoneRuns(jobsLeft: Record<string, number[]>) {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const reconciler = new RunReconciler({
    caches: {
      runs: new MemoryCache<CodingRun>(),
      pods: new MemoryCache<V1Pod>(),
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps: new MemoryCache<ObjectMetadata>(),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: {} as KubeGateway,
    agent: { ...idleAgent, stop: async (run) => jobsLeft[run.metadata.uid]!.shift() ?? 0 },
    events: {} as EventRecorder,
    config,
    logger: {
      info: (fields, message) => lines.push({ fields: fields as Record<string, unknown>, message }),
      warn: (fields, message) => lines.push({ fields: fields as Record<string, unknown>, message }),
    },
  });
  return { reconciler, lines };
}

const run = (uid: string, name: string): CodingRun => codingRunFixture({ metadata: { uid, name, namespace: 'agents' } });

describe('a deleted run whose jobs still run', () => {
  it('logs once per run that the operator waits for its jobs, with how many, while its key is looked at every second', async () => {
    const { reconciler, lines } = reconcilerOfGoneRuns({ 'uid-1': [2, 2, 1], 'uid-2': [1] });
    reconciler.runDeleted(run('uid-1', 'fix'));
    reconciler.runDeleted(run('uid-2', 'lint'));
    for (let look = 0; look < 3; look++) expect(await reconciler.reconcile('agents/fix')).toEqual({ requeueAfterMs: 1_000 });
    expect(await reconciler.reconcile('agents/lint')).toEqual({ requeueAfterMs: 1_000 });
    expect(lines.filter((line) => line.message.startsWith('waiting for'))).toEqual([
      {
        fields: { namespace: 'agents', name: 'fix', uid: 'uid-1', jobsRunning: 2 },
        message: expect.stringContaining('2 running jobs of the deleted run'),
      },
      {
        fields: { namespace: 'agents', name: 'lint', uid: 'uid-2', jobsRunning: 1 },
        message: expect.stringContaining('1 running job of the deleted run'),
      },
    ]);
    // Their jobs ended: stopped for good, said once more, and the wait is over.
    expect(await reconciler.reconcile('agents/fix')).toEqual({ forget: true });
    expect(lines.map((line) => line.message).filter((message) => message.startsWith('stopped the agent'))).toHaveLength(1);
  });

  it('logs the wait again for a run deleted again under the same uid after it was stopped (a watch that reported it twice)', async () => {
    const { reconciler, lines } = reconcilerOfGoneRuns({ 'uid-1': [1, 0, 1] });
    reconciler.runDeleted(run('uid-1', 'fix'));
    await reconciler.reconcile('agents/fix');
    await reconciler.reconcile('agents/fix');
    reconciler.runDeleted(run('uid-1', 'fix'));
    await reconciler.reconcile('agents/fix');
    expect(lines.filter((line) => line.message.startsWith('waiting for'))).toHaveLength(2);
  });
});
