// finalize: take the diff from the sandbox (take-diff.ts), keep the whole of it (up to
// 1 MiB) in a ConfigMap and a bounded copy in status.result, and write the terminal phase
// (reconcile/run-status-transitions.ts). The controller then removes the pod. Also runs for
// a run stopped by a budget, so its partial diff is kept. A run with spec.verify whose model
// finished is verified first (verify-work.ts), which may hand it back to the model instead; one
// that would succeed but whose diff changes spec.verify.protect paths fails VerificationFailed.
// A run with a cancel requested, or whose spec no longer parses, is neither verified nor
// finalized: the controller ends it (Cancelled, InvalidSpec), and the job is put off meanwhile.
import { FAILURE_MESSAGES, REASONS, RunFailure, type ParsedCodingRun } from '../api/index.ts';
import { withDiffNote, type KeptDiff } from '../reconcile/kept-diff.ts';
import { finishStatus, loopOutcome, recordProgress } from '../reconcile/run-status-transitions.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { diffSha } from '../reconcile/diff-config-map.ts';
import { forgetRun } from './forget-run.ts';
import { handOn } from './hand-on.ts';
import { startPublish } from './publish-job.ts';
import { runToActOn, throwIfPutOff } from './live-run.ts';
import { observeFinished } from './run-metrics.ts';
import type { RunState } from './run-state.ts';
import { storeFinalDiff, takeSandboxDiff } from './keep-diff.ts';
import { settleTrailingRecord } from './trailing-record.ts';
import { finishedResult, verifyWork } from './verify-work.ts';
import { protectedChangeIn } from './protected-change-check.ts';
import { protectedChangeFailure, unreadDiffFailure } from './protected-paths-changed.ts';
import { addedTimings, timing } from '../reconcile/run-timings.ts';

/**
 * The diff from the sandbox (bounded as takeSandboxDiff is), stored as the run's final diff.
 * A diff equal to the last snapshot is already stored whole and not written again: a finished
 * run costs no more requests than before snapshots. Left marked `snapshot`, it needs no final
 * mark, since no snapshot of this run can land after it: the run's steps hand on to finalize
 * one after the other (the last step stored its snapshot before finalize was queued), and the
 * controller's endings (a deadline, a cancel, a lost agent) store a final diff themselves.
 * A diff that differs is one write of kind final, over the snapshot's ConfigMap in one patch.
 */
export async function finalDiff(
  deps: Pick<AgentDependencies, 'sandboxes' | 'resources' | 'logger'>,
  run: ParsedCodingRun,
  state: RunState,
): Promise<KeptDiff> {
  // The model is done: what it left running (a dev server) is swept, not left to run through a
  // wait for the publish approval that may last days.
  const taken = await takeSandboxDiff(deps.sandboxes.for(run), state.revision, true);
  const snapshot = state.diffSnapshot;
  if (snapshot && diffSha(taken.diff) === snapshot.sha256) return { ...taken, configMap: snapshot.configMap };
  return storeFinalDiff(deps, run, taken, snapshot?.configMap);
}

type Ending = ReturnType<typeof loopOutcome>;

/**
 * The ending of a run that would succeed, unless its diff changes spec.verify.protect paths: the
 * restore before the check did not hold until the diff was taken (the check, or what it ran,
 * changed them after), so the change is not the one graded, and docs/verify.md tells the approver
 * protected paths show no change. The run fails VerificationFailed, the diff kept to be read.
 */
async function protectedPathsHeld(deps: AgentDependencies, run: ParsedCodingRun, kept: KeptDiff, ending: Ending): Promise<Ending> {
  if (ending.phase !== 'Succeeded') return ending;
  const change = await protectedChangeIn(deps, run, kept.diff, kept.truncated);
  if (!change) return ending;
  const message = 'failed' in change ? unreadDiffFailure(change.failed) : protectedChangeFailure(change.paths);
  return { phase: 'Failed', reason: REASONS.VerificationFailed, message };
}

export async function runFinalizeJob(deps: AgentDependencies, ref: RunRef): Promise<void> {
  const finalizeStarted = deps.now();
  const state = await deps.states.load(ref);
  if (!state) throw new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateGone);
  // Verification runs spec.verify.command, code the model wrote, and may end the run Succeeded
  // before the controller's Cancelled: a run with a cancel requested is not finalized here, and
  // the job is tried again later (live-run.ts runToActOn); nor is one whose spec no longer
  // parses, its state kept for the controller's InvalidSpec ending (live-run.ts runNow). Before
  // the hand-on too, which may finish a resumed step's calls.
  const found = await runToActOn(deps, ref);
  throwIfPutOff(found, 'verify or finalize the run');
  // A redone finalize whose verification already handed the run back to the model, or that
  // handed it to publishing (spec.publish, maybe waiting for its approval): only hand it on again.
  if (state.stage === 'stepping' || state.stage === 'publishing' || state.stage === 'waiting') {
    await handOn(deps, ref, state);
    return;
  }
  if ('ended' in found) {
    await forgetRun(deps, ref);
    return;
  }
  const { run } = found;
  // A step's record still owed (trailing-record.ts), when the step after it ended the loop by
  // failing on the deadline (run-agent-job.ts): it lands before the run's end.
  await settleTrailingRecord(deps, run, state);
  if ((await verifyWork(deps, run, state)) === 'again') return;
  const kept = await finalDiff(deps, run, state);
  const summary = state.finalText ?? state.stop?.message ?? '';
  const ending = await protectedPathsHeld(
    deps,
    run,
    kept,
    loopOutcome({ steps: state.step, stop: state.stop, filesChanged: kept.filesChanged }),
  );
  if (ending.phase === 'Succeeded' && (await startPublish(deps, run, state, kept, summary))) return;
  const { phase, reason } = ending;
  const note = phase === 'Succeeded' && state.verificationNote ? ` ${state.verificationNote}` : '';
  const message = withDiffNote(`${ending.message}${note}`, kept);
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, current) => {
    // Finalize ends with this write: its time is the diff taken and stored (status.timings).
    const timings = [...(state.timings ?? []), timing('Finalize', finalizeStarted, now)];
    recordProgress(status, { steps: state.step, toolCalls: state.toolCalls, usage: state.usage, timings });
    // The commit cloned, so a run with spec.continueFrom naming this one clones it too.
    status.result = finishedResult(kept, summary, state);
    return finishStatus(status, phase, reason, message, current.metadata.generation ?? 0, now);
  });
  if (outcome.written) {
    deps.metrics.observePhases(addedTimings(run.status?.timings, outcome.run.status?.timings));
    await deps.events.record(outcome.run, { type: phase === 'Succeeded' ? 'Normal' : 'Warning', reason, message });
    observeFinished(deps, outcome.run, phase, reason);
  }
  await forgetRun(deps, ref);
}
