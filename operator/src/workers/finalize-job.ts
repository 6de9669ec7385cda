// finalize: take the diff from the sandbox (take-diff.ts), keep the whole of it (up to
// 1 MiB) in a ConfigMap and a bounded copy in status.result, and write the terminal phase
// (reconcile/run-status-transitions.ts). The controller then removes the pod. Also runs for
// a run stopped by a budget, so its partial diff is kept.
import { FAILURE_MESSAGES, LIMITS, REASONS, RunFailure } from '../api/index.ts';
import { finishStatus, loopOutcome, recordProgress } from '../reconcile/run-status-transitions.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { cutAtLine } from './diff-stats.ts';
import { forgetRun } from './forget-run.ts';
import { liveRun } from './live-run.ts';
import { observeFinished } from './run-metrics.ts';
import { takeDiff } from './take-diff.ts';

export async function runFinalizeJob(deps: AgentDependencies, ref: RunRef): Promise<void> {
  const state = await deps.states.load(ref);
  if (!state) throw new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateGone);
  const run = await liveRun(deps, ref);
  if (!run) {
    await deps.states.delete(ref.uid);
    return;
  }
  const { diff, truncated, stats } = await takeDiff(deps.sandboxes.for(run));
  const diffConfigMap = diff.length > 0 ? await deps.resources.writeDiff(run, diff) : undefined;
  const shown = cutAtLine(diff, LIMITS.diff);
  const summary = cutAtLine(state.finalText ?? state.stop?.message ?? '', LIMITS.summary).text;
  const { phase, reason, message } = loopOutcome({ steps: state.step, stop: state.stop, filesChanged: stats.filesChanged });
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, current) => {
    recordProgress(status, { steps: state.step, toolCalls: state.toolCalls, usage: state.usage });
    status.result = {
      summary,
      diff: shown.text,
      diffTruncated: shown.truncated || truncated,
      ...(diffConfigMap ? { diffConfigMap } : {}),
      ...stats,
    };
    return finishStatus(status, phase, reason, message, current.metadata.generation ?? 0, now);
  });
  if (outcome.written) {
    await deps.events.record(outcome.run, { type: phase === 'Succeeded' ? 'Normal' : 'Warning', reason, message });
    observeFinished(deps, outcome.run, phase, reason);
  }
  await forgetRun(deps, ref);
}
