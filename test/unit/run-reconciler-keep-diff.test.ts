// The reconciler applying decide()'s keepDiff for a started run whose spec no longer parses (an
// upgrade tightened the schema): the run ends InvalidSpec saying its diff was kept, so the last
// snapshot must reach status.result, taken without the sandbox, whose session is checked
// against a pod shape built from the parsed spec.
import { describe, expect, it, vi } from 'vitest';
import type { CodingRun, ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import type { RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryReconcilerScene } from '../support/memory-reconciler-scene.ts';
import { standingSandboxPod } from '../support/standing-sandbox-pod.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowUnisolatedSandboxes: true, networkPolicy: false }, {});

const DIFF = 'diff --git a/app.js b/app.js\n--- a/app.js\n+++ b/app.js\n@@ -1 +1 @@\n-old\n+new\n';
const SNAPSHOT: KeptDiff = {
  source: 'snapshot',
  diff: DIFF,
  truncated: false,
  filesChanged: 1,
  insertions: 1,
  deletions: 1,
  configMap: 'fix-diff',
};

function scene(run: CodingRun) {
  const keepDiff = vi.fn<RunAgent['keepDiff']>(async () => SNAPSHOT);
  const woken: string[] = [];
  const { reconciler, kube } = memoryReconcilerScene(run, {
    config,
    now: NOW,
    // The run's sandbox pod, up: decide() asks for the diff from it (fromSandbox: true). The
    // run's spec does not parse, but the pod is built from its metadata and status only.
    pods: [standingSandboxPod(run as ParsedCodingRun)],
    agent: { keepDiff },
    wake: (key) => woken.push(key),
  });
  return { reconciler, kube, keepDiff, woken };
}

/** Reconciles until a take started by the first look has ended and the run is decided on with it. */
async function reconcileThroughTake(reconciler: RunReconciler, keepDiff: ReturnType<typeof vi.fn>, woken: string[]): Promise<void> {
  await reconciler.reconcile('agents/fix');
  if (keepDiff.mock.calls.length === 0) return;
  await vi.waitFor(() => expect(woken).toContain('agents/fix'));
  await reconciler.reconcile('agents/fix');
}

describe('a started run whose spec no longer parses, ended keeping its diff', () => {
  // Accepted by an earlier operator; this one allows at most 1000 steps.
  const stricter = codingRunFixture({
    spec: { budget: { maxSteps: 5000 } },
    status: { phase: 'Running', podName: 'fix-sandbox', startTime: '2026-11-29T11:59:10Z', observedGeneration: 1 },
  });

  it('keeps the last snapshot, asked of the agent without the sandbox, and ends the run with it in status.result', async () => {
    const { reconciler, kube, keepDiff, woken } = scene(stricter);
    await reconcileThroughTake(reconciler, keepDiff, woken);
    const ended = kube.replaceRunStatus.mock.calls.map(([, status]) => status).find((status) => status?.phase === 'Failed');
    expect(ended?.reason).toBe('InvalidSpec');
    expect(ended?.result).toMatchObject({ diffSource: 'snapshot', diff: DIFF, diffConfigMap: 'fix-diff', filesChanged: 1 });
    expect(keepDiff).toHaveBeenCalledTimes(1);
    expect(keepDiff.mock.calls[0]![0].metadata.uid).toBe('uid-1');
    expect(keepDiff.mock.calls[0]![1]).toEqual({ fromSandbox: false });
  });
});
