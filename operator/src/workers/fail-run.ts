// Ends a run as Failed from a worker: the diff kept (from the sandbox when it answers, else the
// last snapshot: keep-diff.ts) with the final answer and verification the run has, the
// terminal status (computed by reconcile/run-status-transitions.ts, as the controller's is),
// its Warning Event and metrics, then the agent forgets the run. The worker reaches this
// through job-failure.ts, which maps what a job threw to the reason.
// Two failures are left to the controller's own ending (endingLeftToController): a run whose
// spec no longer parses (InvalidSpec, its state kept for the diff), and a run with a cancel
// requested whose state is gone or unreadable (Cancelled).
import { LIMITS, REASONS, type ParsedCodingRun } from '../api/index.ts';
import { readCancelRequest } from '../reconcile/cancel-request.ts';
import { keptDiffResult, withDiffNote } from '../reconcile/kept-diff.ts';
import { failStatus, recordProgress } from '../reconcile/run-status-transitions.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { forgetRun } from './forget-run.ts';
import { keepRunDiff } from './keep-diff.ts';
import { runNow, type RunNow } from './live-run.ts';
import { recordFailure } from './record-step.ts';
import { observeFinished } from './run-metrics.ts';
import { settleTrailingRecord } from './trailing-record.ts';
import { finishedResult } from './verify-work.ts';

/**
 * Whether a run's failure is left to the controller's cancel. Its cancel stop removes the run's
 * jobs, deletes the state, then writes Cancelled: a job queued after a save in between, or put
 * off and run again after the stop, finds no state (StateLost) while the run still reads as
 * live. Writing Failed/StateLost then would end a cancelled run as lost, with a Warning Event.
 * (A state that does not verify is StateLost too; decide.ts ends a run with a cancel requested
 * Cancelled before it looks at the agent, so the controller's ending is the same.) Its diff is
 * left to that ending too: a worker's final diff would race it. A cancel withdrawn meanwhile
 * leaves a run with no state and no job, which the controller fails StateLost at its next look
 * (decide.ts agentLoss). Any other failure is written as it is: a cancel being requested does
 * not make, say, a refused key any less the run's end.
 */
function cancelEndsIt(run: ParsedCodingRun, reason: string): boolean {
  return reason === REASONS.StateLost && readCancelRequest(run) !== undefined;
}

/**
 * The controller's ending a run's failure is left to, if any: nothing is written (no status, no
 * diff, no Event), and `keepState` says whether the agent still forgets the run. A live run
 * whose spec no longer parses is ended by the controller Failed InvalidSpec, whatever failed
 * here, keeping its diff against the commit its state names (decide.ts; run-reconciler.ts
 * keepDiff): a failure written here would keep none (this worker cannot read such a run's
 * spec), and a state deleted here would leave that diff without its revision, so the
 * spec.continueFrom its message suggests would be refused. The state stays; the ending's stop
 * deletes it. A cancelled run whose state is gone is cancelEndsIt's.
 */
function endingLeftToController(found: RunNow, reason: string): { why: string; keepState: boolean } | undefined {
  if ('specInvalid' in found) {
    return { why: "The run's spec no longer parses; the controller ends it InvalidSpec from its state, which is kept", keepState: true };
  }
  if ('run' in found && cancelEndsIt(found.run, reason)) {
    return { why: "A cancel is requested and the run's state is gone; the controller ends it Cancelled", keepState: false };
  }
  return undefined;
}

/**
 * `agentWorked`: the run got past prepare (its tree is in the sandbox, the agent may have
 * changed it), so there is a diff to keep; a run failed by its prepare job has none. The run is
 * read either way: a prepare's failure may be the controller's to write too (a prepare redone
 * over a state that does not verify, StateLost, on a run with a cancel requested).
 */
export async function failRun(deps: AgentDependencies, ref: RunRef, reason: string, message: string, agentWorked = true): Promise<void> {
  const found = await runNow(deps, ref);
  const left = endingLeftToController(found, reason);
  if (left) {
    deps.logger.warn({ reason }, `${left.why}: ${message}`.slice(0, LIMITS.message));
    if (!left.keepState) await forgetRun(deps, ref);
    return;
  }
  // A run read before the write that accepts it (live-run.ts awaitsAcceptance) is no ending the
  // controller is about to write: the job's tries are spent and nothing runs it again, so its
  // failure is written, with no diff (its spec, and so its sandbox, is not known yet).
  const run = agentWorked && 'run' in found ? found.run : undefined;
  // A sandbox that would not answer the job is not asked again: its snapshot is the latest.
  // The state's commit cloned: the diff is against it, and a run stopped by a failure (its diff
  // kept) can still be continued (spec.continueFrom). Its diffSnapshot is what a snapshot read
  // back must match to be kept (keep-diff.ts). A state gone or unreadable just leaves them out.
  const state = await deps.states.load(ref).catch(() => undefined);
  // A step's record still owed (trailing-record.ts) lands before the run's end if it can; a
  // record that cannot be written does not keep the run from ending.
  if (run && state) await settleTrailingRecord(deps, run, state).catch(() => undefined);
  const sandbox = run && reason !== REASONS.SandboxLost ? deps.sandboxes.for(run) : undefined;
  const kept = run ? await keepRunDiff(deps, run, sandbox, state) : undefined;
  const shown = kept ? withDiffNote(message, kept) : message;
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, current) => {
    // A run that finished and then failed (publishing: PublishFailed) keeps its final answer and
    // its verification, as a finished run's status shows them: an eval's graders read both.
    if (kept) status.result = state ? finishedResult(kept, state.finalText ?? '', state) : keptDiffResult(kept, '');
    // The last step's progress, which rides on the terminal write when the run was finalizing (end-step.ts).
    if (state && state.step >= (status.steps ?? 0))
      recordProgress(status, { steps: state.step, toolCalls: state.toolCalls, usage: state.usage });
    return failStatus(status, reason, shown, current.metadata.generation ?? 0, now);
  });
  if (outcome.written) {
    const step = state?.step ?? outcome.run.status?.steps ?? 0;
    await recordFailure(deps, { metadata: { ...ref } }, step, reason, shown);
    await deps.events.record(outcome.run, { type: 'Warning', reason, message: shown });
    observeFinished(deps, outcome.run, 'Failed', reason);
  }
  // deps.logger is the job's child logger: the run's namespace, name and uid are bound.
  // Cut as status cuts it: a message is built from input a run author controls.
  deps.logger.warn({ reason }, shown.slice(0, LIMITS.message));
  await forgetRun(deps, ref);
}
