// failRun (workers/fail-run.ts): what status.result says of a run a worker fails. A run that
// finished, passed spec.verify and then failed publishing keeps its final answer and its
// verification: an eval's graders read status.result.summary and .verification.
import { describe, expect, it } from 'vitest';
import { REASONS, type Verification } from '../../operator/src/api/index.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import { failRun } from '../../operator/src/workers/fail-run.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { FAILED_RUN_REF, failRunHarness } from '../support/fail-run-harness.ts';

const SNAPSHOT = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+snapshot\n';

const ref = FAILED_RUN_REF;
const revision = 'a'.repeat(40);
const passed: Verification = { passed: true, exitCode: 0, outputTail: 'ok', durationMs: 1200, attempts: 1 };

/** A Running run whose sandbox answers a one-line diff, and what failRun wrote to its status. */
function failing(state: Partial<RunState> | undefined) {
  const { deps, done } = failRunHarness({ state: state && { step: 3, toolCalls: 2, revision, ...state } });
  return { deps, written: done.written };
}

describe('failRun: status.result of a run a worker fails', () => {
  it('keeps the final answer and the verification of a run that finished and then failed publishing', async () => {
    const { deps, written } = failing({ finalText: 'Fixed the greeting.', verification: { ...passed, step: 3 } });
    await failRun(deps, ref, REASONS.PublishFailed, 'Publishing failed: the forge refused the push.');
    const status = written.at(-1)!;
    expect(status.phase).toBe('Failed');
    expect(status.result?.summary).toBe('Fixed the greeting.');
    expect(status.result?.verification).toEqual(passed);
    expect(status.result?.diffConfigMap).toBe('r-diff');
    expect(status.result?.revision).toBe(revision);
  });

  it('keeps the diff with an empty summary and no verification when the run has neither', async () => {
    const { deps, written } = failing({});
    await failRun(deps, ref, REASONS.AgentFailed, 'The agent failed.');
    const result = written.at(-1)!.result;
    expect(result?.summary).toBe('');
    expect(result?.verification).toBeUndefined();
    expect(result?.filesChanged).toBe(1);
  });

  it("keeps no diff planted in the run's ConfigMap when its sandbox is lost, and its message says why", async () => {
    const { deps, written } = failing({ diffSnapshot: { sha256: diffSha(SNAPSHOT), configMap: 'r-diff' } });
    const planted = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+planted\n';
    Object.assign(deps.resources, { readDiff: async () => ({ configMap: 'r-diff', diff: planted, kind: 'final' }) });
    await failRun(deps, ref, REASONS.SandboxLost, 'The sandbox pod was lost.');
    const status = written.at(-1)!;
    expect(status.message).toContain('The full diff could not be kept: the diff ConfigMap r-diff was changed after the run stored it');
    expect(status.result).toMatchObject({ diffSource: 'none', filesChanged: 0, diff: '' });
    expect(status.result).not.toHaveProperty('diffSha256');
  });

  it('keeps the diff when the state is gone', async () => {
    const { deps, written } = failing(undefined);
    await failRun(deps, ref, REASONS.AgentFailed, 'The agent failed.');
    expect(written.at(-1)!.result).toMatchObject({ summary: '', diffConfigMap: 'r-diff', filesChanged: 1 });
  });
});
