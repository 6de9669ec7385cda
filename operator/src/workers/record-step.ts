// What the transcript keeps of a step (or of a resumed approval) and of a failed run: the entry
// is built from what the step already holds (its calls and results, the model's text, the
// usage of its model calls) and written through the TranscriptWriter before the step hands the
// run on, so `kubectl codingrun logs -f` shows a step by the time its status does. A step redone
// after a crash writes the same key again. Past MAX_RECORDED_STEPS steps, or
// MAX_RECORDED_APPROVALS answers to approvals, one `cut` entry says so.
import { EVENT_REASONS, type CodingRun } from '../api/index.ts';
import { apiRefusal } from '../kube/api-errors.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import {
  DEFAULT_BOUNDS,
  MAX_RECORDED_APPROVALS,
  MAX_RECORDED_STEPS,
  boundEntry,
  boundText,
  closingStep,
  cutKey,
  endKey,
  recordedCall,
  resumeKey,
  stepKey,
  type TranscriptEntry,
  type TranscriptToolCall,
} from '../record/transcript-entry.ts';
import { pendingApprovalView } from './approval-input.ts';
import type { InFlightStep, PendingApprovalState, RunState, ToolResultRecord } from './run-state.ts';
import { repeatedCallIds, repeatedIdResult } from './repeated-call-ids.ts';
import type { TranscriptRun } from './transcript-writer.ts';

/** The step's entry: its calls in the model's order with their results, the one waiting for a human marked. */
export function stepEntry(state: RunState, inFlight: InFlightStep, now: Date): TranscriptEntry {
  const record = inFlight.record;
  const pending = state.pendingApproval;
  const paired = pairResults(inFlight, pending);
  const calls: TranscriptToolCall[] = inFlight.calls.map((call, index) => {
    const entry = recordedCall(call, paired.results[index]);
    if (pending && index === paired.waitingAt) {
      const shown = pendingApprovalView(pending);
      entry.waiting = {
        approvalId: pending.id,
        inputBytes: shown.inputBytes!,
        inputSha256: shown.inputSha256!,
        requestedAt: pending.requestedAt,
      };
    }
    return entry;
  });
  if (record?.answered) calls.unshift(recordedCall(record.answered, paired.answered));
  const startedAt = record?.startedAt;
  const entry: TranscriptEntry = {
    key: record?.approval ? resumeKey(state.step, record.approval.id) : stepKey(state.step),
    kind: record?.approval ? 'approval' : 'step',
    step: state.step,
    at: now.toISOString(),
    ...(startedAt ? { startedAt, durationMs: Math.max(0, now.getTime() - Date.parse(startedAt)) } : {}),
    ...(inFlight.text ? { text: { text: inFlight.text } } : {}),
    ...(calls.length > 0 ? { calls } : {}),
    ...(record?.unusableCalls ? { unusableCalls: record.unusableCalls } : {}),
    ...(record?.usage ? { usage: record.usage } : {}),
    ...(record?.compaction
      ? {
          compaction: {
            summary: { text: record.compaction.summary },
            summarisedMessages: record.compaction.summarisedMessages,
            usage: record.compaction.usage,
          },
        }
      : {}),
    ...(record?.approval ? { approval: record.approval } : {}),
  };
  // Cut now to the bounds the writer cuts to anyway (encodeEntry): while it trails, the entry
  // rides in the run's state (state.trailing) through every save, and uncut it held each
  // call's whole input and result, a written file's content among them.
  return boundEntry(entry, DEFAULT_BOUNDS);
}

/**
 * The result of each of the step's calls by its position, the answered call's (a resume's), and
 * the position of the call waiting for a human (-1: none). A call reusing an earlier call's id
 * in the step did not run (repeated-call-ids.ts): its tool error is made again from
 * the call, for the calls the step reached (those before the waiting one). Every other call has
 * an id no other call of the step has, so its result is found by id (results come in any order:
 * calls on other files run at once). The first result of an id is taken: the answer to a
 * repeated call (in pendingApproval.results) carries the id of the call it repeats, after that
 * call's result.
 */
function pairResults(
  inFlight: InFlightStep,
  pending: PendingApprovalState | undefined,
): { results: (ToolResultRecord | undefined)[]; answered?: ToolResultRecord; waitingAt: number } {
  const byId = new Map<string, ToolResultRecord>();
  for (const result of [...inFlight.earlier, ...inFlight.results, ...(pending?.results ?? [])]) {
    if (!byId.has(result.toolCallId)) byId.set(result.toolCallId, result);
  }
  const repeated = repeatedCallIds(inFlight.calls, inFlight.earlier);
  const waitingAt = pending
    ? inFlight.calls.findIndex((call, index) => !repeated.has(index) && call.toolCallId === pending.toolCallId)
    : -1;
  const reached = waitingAt < 0 ? inFlight.calls.length : waitingAt;
  const answered = inFlight.record?.answered;
  return {
    results: inFlight.calls.map((call, index) =>
      repeated.has(index) ? (index < reached ? repeatedIdResult(call) : undefined) : byId.get(call.toolCallId),
    ),
    ...(answered && byId.has(answered.toolCallId) ? { answered: byId.get(answered.toolCallId) } : {}),
    waitingAt,
  };
}

/**
 * The entry to write for this step, undefined past its bound (after the one `cut` entry): steps
 * past MAX_RECORDED_STEPS, answers to approvals past MAX_RECORDED_APPROVALS (counted in
 * state.recordedApprovals, recordStep).
 */
export function boundedStepEntry(state: RunState, inFlight: InFlightStep, now: Date): TranscriptEntry | undefined {
  const approval = inFlight.record?.approval;
  if (state.step > MAX_RECORDED_STEPS) {
    if (state.step !== MAX_RECORDED_STEPS + 1 || approval) return undefined;
    return cutEntry(
      state.step,
      now,
      `the transcript keeps ${MAX_RECORDED_STEPS} steps; steps from ${state.step} on are not recorded (status has the totals)`,
    );
  }
  const recorded = state.recordedApprovals ?? 0;
  if (!approval || recorded < MAX_RECORDED_APPROVALS) return stepEntry(state, inFlight, now);
  if (recorded > MAX_RECORDED_APPROVALS) return undefined;
  // Its own key: steps are cut only past MAX_RECORDED_STEPS, where no answer is recorded.
  return cutEntry(
    state.step,
    now,
    `the transcript keeps ${MAX_RECORDED_APPROVALS} answers to approvals; from approval ${approval.id} on, the answers and the calls they ran are not recorded (the Approved and Denied Events and status.approvals show the latest answers, status the totals)`,
  );
}

const cutEntry = (step: number, now: Date, message: string): TranscriptEntry => ({
  key: cutKey(step),
  kind: 'cut',
  step,
  at: now.toISOString(),
  message,
});

/**
 * Writes a step's entry. An API server that cannot be reached throws (the step stays in
 * flight and is redone, or a trailing record is sent again); one that refuses the entry (a
 * ResourceQuota on ConfigMaps, a policy) will refuse it again, so the run goes on without it
 * and a Warning Event says so: the record is worth less than the run's work (#13.9, as for
 * the diff ConfigMap).
 */
export async function writeStepEntries(
  deps: Pick<AgentDependencies, 'transcript' | 'events' | 'logger'>,
  run: TranscriptRun & CodingRun,
  entries: readonly TranscriptEntry[],
): Promise<void> {
  if (entries.length === 0) return;
  try {
    await deps.transcript.append(run, entries);
  } catch (error) {
    const refusal = apiRefusal(error);
    if (!refusal) throw error;
    const steps = entries.map((entry) => entry.step);
    const which = steps.length === 1 ? `step ${steps[0]} is` : `steps ${steps.join(', ')} are`;
    const message = `${which} missing from the transcript: the API server refused its ConfigMap (HTTP ${refusal.code}: ${refusal.message}). Raise the namespace ResourceQuota for configmaps (or ask an admin about the policy that refused it).`;
    deps.logger.warn({ steps, code: refusal.code }, 'transcript entry refused; the run goes on without it');
    await deps.events.record(run, { type: 'Warning', reason: EVENT_REASONS.TranscriptNotStored, message });
  }
}

/** writeStepEntries for one step's entry, if it has one. */
export const writeStepEntry = (
  deps: Pick<AgentDependencies, 'transcript' | 'events' | 'logger'>,
  run: TranscriptRun & CodingRun,
  entry: TranscriptEntry | undefined,
): Promise<void> => writeStepEntries(deps, run, entry ? [entry] : []);

/**
 * The step's entry, built now from the step as it ends; written when the caller says
 * (end-step.ts). An answer to an approval's entry is counted in `state`.
 */
export function recordStep(
  deps: Pick<AgentDependencies, 'transcript' | 'now' | 'events' | 'logger'>,
  run: TranscriptRun & CodingRun,
  state: RunState,
  inFlight: InFlightStep,
): StepRecord {
  const entry = boundedStepEntry(state, inFlight, deps.now());
  // Counted in the state the step's end saves (end-step.ts), the cut too, so the count stops at
  // MAX_RECORDED_APPROVALS + 1: a step redone from before that save decides from the same count.
  if (entry && inFlight.record?.approval) state.recordedApprovals = (state.recordedApprovals ?? 0) + 1;
  return { entry, write: () => writeStepEntry(deps, run, entry) };
}

/** A step's transcript entry (none past the bound), built and ready to write. */
export interface StepRecord {
  entry: TranscriptEntry | undefined;
  write(): Promise<void>;
}

/** A run a worker failed: the last entry says why (best effort: the run has already ended). */
export async function recordFailure(
  deps: Pick<AgentDependencies, 'transcript' | 'now' | 'logger'>,
  run: TranscriptRun,
  step: number,
  reason: string,
  message: string,
): Promise<void> {
  // After the last step recorded and the cut past MAX_RECORDED_STEPS (closingStep).
  const recorded = closingStep(step);
  const entry: TranscriptEntry = {
    key: endKey(recorded),
    kind: 'end',
    step: recorded,
    at: deps.now().toISOString(),
    outcome: { phase: 'Failed', reason, message: boundText(message, 4096).text },
  };
  await deps.transcript.append(run, [entry]).catch((error: unknown) => {
    deps.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not record the run failure in its transcript');
  });
}
