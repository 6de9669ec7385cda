// The end of a step (or of a resumed approval): settle the model's answer, decide whether
// the loop goes on (agent/stop-conditions.ts), write the status (computed by
// reconcile/run-status-transitions.ts), save the state and hand the run on: the next step,
// finalize, or a wait for a human (saved before it is shown). The step's transcript entry is
// written first (record-step.ts). Every save here is made only over a state still in Redis:
// the stop that ends a run (a cancel's ending, a deletion) deletes it, and a plain save would
// bring it back (for a Cancelled run, which the leftover-state sweep keeps, counted against its
// namespace's state-bytes budget until the run is deleted). Gone, the run is let go, but what
// ran is still recorded: the step's transcript entry (keyed, so a write again is harmless), never
// its state or status. A deploy that ran must show in the run's record.
import { decideStop, type AnswerCutOff } from '../agent/stop-conditions.ts';
import { EVENT_REASONS, durationMs, type ParsedCodingRun } from '../api/index.ts';
import { awaitApprovalStatus, recordAnsweredApproval, runningAfterStepStatus } from '../reconcile/run-status-transitions.ts';
import type { TranscriptApproval } from '../record/transcript-entry.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { answeredApprovalView } from './answered-approval.ts';
import { pendingApprovalView, previewInput } from './approval-input.ts';
import { forgetRun } from './forget-run.ts';
import { runRefOf } from './run-ref.ts';
import type { RunState } from './run-state.ts';
import type { CallsOutcome } from './run-tool-calls.ts';
import { letRunGo, saveOrLetGo, type LetGo } from './save-if-present.ts';
import { recordStep, writeStepEntries, type StepRecord } from './record-step.ts';
import { MAX_EARLIER_ENTRIES, recordEntries, sendTrailingRecord, settleTrailingRecord, type TrailingRecord } from './trailing-record.ts';
import { addedTimings, hasNewTimings, mergeTimings } from '../reconcile/run-timings.ts';

/** The run ended while its step ran (its stop deleted the state): no more of it is done. */
const STEP_RAN: LetGo = { why: 'the run ended while its step ran: no more of it is done and the run is let go' };

/**
 * The step's calls ran (or it parked on an approval): settle its answer and hand the run on.
 * The run ended while they ran (`gone`, run-tool-calls.ts): the step is recorded as far as it
 * got (endedDuringStep), and the run is let go.
 */
export async function endStep(deps: AgentDependencies, run: ParsedCodingRun, state: RunState, calls: CallsOutcome): Promise<void> {
  if (calls === 'gone') return endedDuringStep(deps, run, state);
  const parked = calls === 'parked';
  const inFlight = state.inFlight!;
  // Written before the state without the step in flight is saved (afterCalls): a failed
  // write leaves the step in flight, to be redone. Built now, while the state is the step's.
  const record = recordStep(deps, run, state, inFlight);
  delete state.inFlight;
  if (!parked && !inFlight.hadToolCalls) state.finalText = inFlight.text;
  await afterCalls(deps, run, state, {
    hadToolCalls: inFlight.hadToolCalls,
    ...(inFlight.cutOff ? { cutOff: inFlight.cutOff } : {}),
    resumed: inFlight.resumed,
    ...(inFlight.record?.approval ? { answered: inFlight.record.approval as TranscriptApproval } : {}),
    record,
  });
}

/** Save, report, and hand on: the next step, finalize, or a wait for approval. */
export async function afterCalls(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  last: {
    hadToolCalls: boolean;
    /** The provider ended the step's answer early: not a final answer. */
    cutOff?: AnswerCutOff;
    resumed?: boolean;
    answered?: TranscriptApproval;
    /** The step's transcript entry: it lands before the state without the step in flight is saved, or trails it (trailing-record.ts). */
    record?: StepRecord;
  },
): Promise<void> {
  // The live run's identity, not the state's (Security #11.1: status goes to this run only).
  const ref = runRefOf(run);
  // The step before this one may still be writing its record: it lands before this step's.
  // When this process is still sending it, it is not waited for here: a running step that goes
  // on sends its own record behind it, carrying its entries (trailing-record.ts); any other end
  // settles it below.
  const previous = state.trailing;
  const behind =
    previous !== undefined &&
    (previous.earlier?.length ?? 0) < MAX_EARLIER_ENTRIES &&
    deps.trailing?.onItsWay(ref.uid, previous.step) === true;
  if (!behind) await settleTrailingRecord(deps, run, state);
  const now = deps.now();
  if (state.stage !== 'waiting') {
    const stop = decideStop({
      steps: state.step,
      discardedModelCalls: state.discardedModelCalls,
      lastStepHadToolCalls: last.hadToolCalls,
      lastAnswerCutOff: last.cutOff,
      usage: state.usage,
      budget: run.spec.budget,
      startedAt: state.startedAt,
      timeoutMs: durationMs(run.spec.budget.timeout),
      now: now.getTime(),
      unusableToolCallSteps: state.unusableToolCallSteps ?? 0,
      lastUnusableToolCall: state.lastUnusableToolCall,
    });
    if (stop.stop) {
      state.stage = 'finalizing';
      if (stop.outcome === 'failed') state.stop = { reason: stop.reason, message: stop.message };
    } else {
      state.stage = 'stepping';
    }
  }

  const trailsOn = state.stage === 'stepping' && !last.resumed && deps.trailing !== undefined && run.status?.phase === 'Running';
  if (behind && !trailsOn) await settleTrailingRecord(deps, run, state);

  // The model is done and finalize's terminal write (finalize-job.ts) will carry this step's
  // progress (steps, tool calls, usage, timings) anyway: no write of its own. Not when verify
  // or publish may come between, which write the status without it.
  if (state.stage === 'finalizing' && !last.resumed && !run.spec.verify && !run.spec.publish) {
    await last.record?.write();
    if (!(await saveOrLetGo(deps, ref, state, STEP_RAN))) return;
    await deps.queue.finalize(ref, state.verification?.attempts);
    return;
  }
  const pending = state.pendingApproval;
  const progress = {
    steps: state.step,
    toolCalls: state.toolCalls,
    usage: { ...state.usage },
    // Rounded up: the controller's deadline (decide.ts) must never come before the agent's.
    ...(state.approvalWaitMs !== undefined ? { approvalWaitSeconds: Math.ceil(state.approvalWaitMs / 1000) } : {}),
  };
  // Phases the workers timed ride on this write, only while status lacks one of them (step 1,
  // and the step with the first tool call): the run as read when the step began has the rest.
  // The write replaces status.timings whole, so only from a copy that holds the controller's
  // (its Running write always has some; none come after it): a copy read before that write
  // would drop them (the run's agent can start before it lands), and a later write carries them.
  const read = run.status?.timings;
  const timings = read?.length && hasNewTimings(read, state.timings) ? mergeTimings(read, state.timings) : undefined;
  const stepProgress = { ...progress, ...(timings ? { timings } : {}) };
  const running = state.stage !== 'waiting' && !last.resumed;
  // The common case, a running run going on to its next step: the state names the step's
  // record, is saved, and the next step is queued while the record's two writes go out
  // (trailing-record.ts). The next job settles them before it writes its own, or, going on
  // itself while they are still on their way, sends its record behind them.
  if (trailsOn && deps.trailing) {
    const earlier = behind && previous ? recordEntries(previous) : [];
    const record: TrailingRecord = {
      step: state.step,
      progress: stepProgress,
      ...(last.record?.entry ? { entry: last.record.entry } : {}),
      ...(earlier.length > 0 ? { earlier } : {}),
    };
    state.trailing = record;
    // Not yet sent if the state is gone: the entries that were to trail the save are written
    // then, before the run goes.
    const recordFirst = () => recordOfEndedRun(deps, state.step, () => writeStepEntries(deps, run, recordEntries(record)));
    if (!(await saveOrLetGo(deps, ref, state, { ...STEP_RAN, recordFirst }))) return;
    const keys = recordEntries(record).map((entry) => entry.key);
    deps.trailing.start(ref.uid, record.step, (landed) => sendTrailingRecord(deps, run, record, landed), keys);
    await deps.queue.step(ref, state.step);
    return;
  }
  // Otherwise a running run's progress costs one request, sent beside the transcript entry's
  // (both are the same step's and either may land first: `logs -f` follows the transcript on
  // its own). Both land before the state is saved: a job that dies between them and the save
  // is redone from the step in flight and writes the same two things again. Phase changes
  // (approvals) and surprises (a run that ended meanwhile) take the careful path.
  const [quick] = await Promise.all([
    running ? deps.status.progress(ref.namespace, ref.name, ref.uid, stepProgress) : undefined,
    last.record?.write(),
  ]);
  if (quick) {
    if (!(await saveOrLetGo(deps, ref, state, STEP_RAN))) return;
    deps.metrics.observePhases(addedTimings(run.status?.timings, quick.status?.timings));
    // A step is in the transcript (record-step.ts), not in an Event: Events are for transitions.
    if (state.stage === 'finalizing') await deps.queue.finalize(ref, state.verification?.attempts);
    else await deps.queue.step(ref, state.step);
    return;
  }
  // The careful write lands before the save too, for the same reason: a try that fails in
  // between is redone from what was saved before it and writes again (so an answered
  // approval's entry in status.approvals is never lost). Not a wait for a human: an answer may
  // come as soon as status shows the call, and its resume job must find the state waiting. A
  // wait whose write failed is shown by the retry instead (hand-on.ts).
  const waits = state.stage === 'waiting' && pending !== undefined;
  if (waits && last.answered) state.answeredBeforeWait = last.answered;
  else delete state.answeredBeforeWait;
  if (waits && !(await saveOrLetGo(deps, ref, state, STEP_RAN))) return;
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status) => {
    const generation = run.metadata.generation ?? 0;
    // Who answered, in status as well as in the transcript (#15.5).
    if (last.answered) recordAnsweredApproval(status, answeredApprovalView(last.answered));
    // The whole input with its size and sha256 (Security #11.5): an approval names that digest.
    const withTimings = { ...progress, ...(state.timings ? { timings: state.timings } : {}) };
    if (state.stage === 'waiting' && pending)
      return awaitApprovalStatus(status, withTimings, pendingApprovalView(pending), ref.name, generation, now);
    return runningAfterStepStatus(status, withTimings, generation, now);
  });
  if (!outcome.written) {
    // The controller or a user ended the run meanwhile (its state was dropped then, or is
    // dropped now if a wait has just saved it again): nothing more to do here.
    await forgetRun(deps, ref);
    return;
  }
  deps.metrics.observePhases(addedTimings(run.status?.timings, outcome.run.status?.timings));
  if (!waits && !(await saveOrLetGo(deps, ref, state, STEP_RAN))) return;
  if (waits && pending) {
    // A transition, so an Event: kubectl describe shows the run waits, and for what.
    await deps.events.record(outcome.run, {
      type: 'Normal',
      reason: EVENT_REASONS.AwaitingApproval,
      message: `${pending.toolName} call ${pending.id} waits for approval: ${previewInput(pending.input)}`,
    });
    return;
  }
  if (state.stage === 'finalizing') await deps.queue.finalize(ref, state.verification?.attempts);
  else await deps.queue.step(ref, state.step);
}

/**
 * The run ended while the step's calls ran (a save found its state deleted by the stop that ended
 * it): its record is written as far as it got (recordEndedStep), then the run is let go: no state,
 * no status, nothing queued.
 */
export async function endedDuringStep(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<void> {
  await letRunGo(deps, runRefOf(run), state, { ...STEP_RAN, recordFirst: () => recordEndedStep(deps, run, state) });
}

/**
 * The record of a step whose run ended while it ran, or as a resumed approval's answer was to be
 * saved (resume-job.ts): the calls that did run are the run's record all the same, so the step's
 * transcript entry is written as far as it got (results for the calls that ran, none for those
 * that did not), through the same record path as a step that goes on. Best effort (recordOfEndedRun).
 */
export async function recordEndedStep(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<void> {
  const record = recordStep(deps, run, state, state.inFlight!);
  await recordOfEndedRun(deps, state.step, () => record.write());
}

/**
 * Writes an ended run's record, best effort: thrown on, the job would be retried and find no
 * state (a StateLost failure written over the ending). A refusal is already a Warning Event
 * (writeStepEntries); an API server out of reach is only logged.
 */
async function recordOfEndedRun(deps: AgentDependencies, step: number, write: () => Promise<void>): Promise<void> {
  await write().catch((error: unknown) => {
    deps.logger.warn(
      { step, err: error instanceof Error ? error.message : String(error) },
      'could not record the step of a run that ended while it ran',
    );
  });
}
