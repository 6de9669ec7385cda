// Running a step's tool calls: in order, each result kept as it comes (so a step redone
// after a crash runs only the calls not finished; a read's result rides on the next save),
// up to the first call that needs a human's approval, which parks the run with the calls
// after it. Once they ran, the diff they may have made is stored (diff-snapshot.ts). A call
// reusing an earlier call's id in the step does not run (repeated-call-ids.ts). Every save
// here is made only over a state still in Redis: the stop that ends a run (a cancel's ending,
// a deletion) deletes it, and a save after a call would bring it back; gone, no more of the
// step's calls run and the step's end lets the run go (end-step.ts).
import { protectingSandbox } from './protecting-sandbox.ts';
import { collectFilesTouched } from '../agent/files-touched.ts';
import { forgetImages } from '../agent/image-result.ts';
import { modelAcceptsImages } from '../providers/provider-registry.ts';
import type { ParsedCodingRun } from '../api/index.ts';
import { changesSandbox, isToolName } from '../../../sandbox-image/toolbox/contract/tool-schemas.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { refuseOversizedApproval } from './approval-input.ts';
import { mayChangeFiles, snapshotDiffAfterCalls } from './diff-snapshot.ts';
import type { PendingToolCall, RunState, ToolResultRecord } from './run-state.ts';
import { toolCallObserver } from './run-metrics.ts';
import { mergeTimings, timing } from '../reconcile/run-timings.ts';
import { executeToolCalls, toolMessage, withRunDeadline } from './tool-execution.ts';
import { deadlineOf } from './step-job.ts';
import { repeatedCallIds, repeatedIdResult } from './repeated-call-ids.ts';
import { RunStateGoneError } from './errors/run-state-gone-error.ts';

/**
 * Whether a call's result is saved as soon as it finishes: a call that may change the
 * workspace (the contract's TOOL_EFFECTS) must never run twice, and so must a tool this operator
 * does not know. A read's result is not saved on its own: it goes with the next save (the
 * next call's, or the step's end), and a step redone before that runs the read again and
 * sees the workspace as it is then, as a read that the toolbox's call journal does not keep
 * would anyway (docs/operations.md). A save writes the whole state, so this is one write of
 * the conversation fewer per read (#17.5, docs/benchmarks.md). The one call a job runs is
 * saved once its diff is taken, with the diff's sha256 (diff-snapshot.ts).
 */
export const savedOnItsOwn = (toolName: string): boolean => !isToolName(toolName) || changesSandbox(toolName);

/**
 * Whether a step's state (the model's answer, its calls) is saved before its calls run: only
 * when one of them is saved on its own, so that a redo finishes the step from its calls and
 * never asks the model for different ones after a change already happened. A step of reads
 * only (or an answer) is saved once, at its end: a worker that dies before that redoes the
 * step from the model call, which its reads could not have told apart. That costs the model
 * call again; it saves a write of the whole conversation per such step (#17.5,
 * docs/benchmarks.md).
 */
export const savedBeforeCalls = (calls: readonly { toolName: string }[]): boolean => calls.some((call) => savedOnItsOwn(call.toolName));

/** What a step keeps of its calls as they finish, and what it does once they all have. */
export interface CallProgress {
  /** Calls that finished in an earlier try, not run again. */
  done: readonly ToolResultRecord[];
  /** An earlier try of the step may have sent the calls not done (a redo): past the deadline they are not said to have not run. */
  redo: boolean;
  /** Keeps a result; `save`: saved now (a call that must not run twice), else it rides on the next save. */
  record(result: ToolResultRecord, save: boolean): Promise<void>;
  /** After the calls, before the step's state moves on: stores the diff they made (diff-snapshot.ts); `owed`, a result still to save. */
  snapshot(owed: boolean): Promise<void>;
}

/**
 * How a step's calls ended: all ran (`ran`), the run parked on a call that needs approval
 * (`parked`), or the run ended meanwhile (`gone`): a save found its state deleted by the stop
 * that ended it, so no more of the calls ran and nothing was written (RunStateGoneError).
 */
export type CallsOutcome = 'ran' | 'parked' | 'gone';

/**
 * Runs the in-flight step's calls that are not done yet, saving each result that must not be run
 * again as it comes. `redo`: an earlier try began the step (hand-on.ts continueStep).
 */
export async function runInFlightCalls(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  redo = false,
): Promise<CallsOutcome> {
  const inFlight = state.inFlight!;
  // The state was loaded (or saved) by this job before its calls: a save that finds none means
  // the run ended while they ran, never a state to create.
  let gone = false;
  const save = async () => {
    try {
      await deps.states.save(state, { ifPresent: true });
    } catch (error) {
      if (RunStateGoneError.isInstance(error)) gone = true;
      throw error;
    }
  };
  try {
    const parked = await runCallsUntilApproval(deps, run, state, inFlight.calls, inFlight.earlier, {
      done: [...inFlight.results],
      redo,
      record: async (result, saveNow) => {
        inFlight.results.push(result);
        if (saveNow) await save();
      },
      snapshot: (owed) => snapshotDiffAfterCalls(deps, run, state, save, owed),
    });
    return parked ? 'parked' : 'ran';
  } catch (error) {
    // The failed save stops the calls not started (executeToolCalls); any call running beside
    // it is abandoned, and whatever error it ends with is of no account for a run that ended.
    if (gone) return 'gone';
    throw error;
  }
}

/**
 * Runs calls in order up to the first one that needs approval; that one and the rest are
 * parked in the state. Returns true when the run now waits for a human. Calls in
 * `progress.done` finished in an earlier try and are not run again.
 */
export async function runCallsUntilApproval(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  calls: readonly PendingToolCall[],
  earlier: ToolResultRecord[],
  progress?: CallProgress,
): Promise<boolean> {
  const repeated = repeatedCallIds(calls, earlier);
  const gated = calls.findIndex((call, index) => !repeated.has(index) && run.spec.approval.tools.includes(call.toolName as never));
  const now = calls.slice(0, gated < 0 ? calls.length : gated);
  const sandbox = protectingSandbox(deps.sandboxes.for(run), run);
  // Keyed by id: repeatedCallIds leaves at most one call per id to run in the step.
  const done = new Map((progress?.done ?? []).map((result) => [result.toolCallId, result]));
  const observe = toolCallObserver(deps);
  const toRun = now.filter((call, index) => !repeated.has(index) && !done.has(call.toolCallId));
  // The diff is stored once this job's calls ran (diff-snapshot.ts), unless a denied oversized
  // call lets more run after them (below: they store it then). Its sha256 is saved before the
  // write: with the save of the one call run here when there is one, which waits for the diff.
  const goesOn = gated >= 0 && refuseOversizedApproval(calls[gated]!) !== undefined;
  const snapshots = !goesOn && mayChangeFiles([...earlier, ...now.filter((_call, index) => !repeated.has(index))]);
  const alone = snapshots && toRun.length === 1 && savedOnItsOwn(toRun[0]!.toolName);
  const record = progress && ((result: ToolResultRecord) => progress.record(result, savedOnItsOwn(result.toolName) && !alone));
  const fresh = await withRunDeadline(deadlineOf(run, state) - deps.now().getTime(), (deadline) =>
    executeToolCalls(
      sandbox,
      toRun,
      (tool, outcome, seconds) => {
        observe(tool, outcome, seconds);
        // The run's first tool call (status.timings); observed as it ends, so it started `seconds` ago.
        if (!state.timings?.some((entry) => entry.phase === 'FirstToolCall')) {
          const end = deps.now().getTime();
          state.timings = mergeTimings(state.timings, [timing('FirstToolCall', end - seconds * 1000, end)]);
        }
      },
      deadline,
      record,
      state.step,
      { modelAcceptsImages: modelAcceptsImages(run.spec.model), shown: countImages(earlier) + countImages(progress?.done ?? []) },
      progress?.redo,
    ),
  );
  if (snapshots) await progress?.snapshot(alone);
  for (const result of fresh) done.set(result.toolCallId, result);
  const results = [...earlier, ...now.map((call, index) => (repeated.has(index) ? repeatedIdResult(call) : done.get(call.toolCallId)!))];
  state.toolCalls += now.length;
  if (gated < 0) {
    // Only the newest tool message keeps its images, so saved states stay bounded (image-result.ts).
    if (results.length > 0) state.messages = [...forgetImages(state.messages), toolMessage(results)];
    state.filesTouched = collectFilesTouched(state.messages.slice(-2), state.filesTouched);
    delete state.pendingApproval;
    return false;
  }
  const call = calls[gated]!;
  // Security #11.5: a human approves the whole input or nothing; one too large to show whole is denied now.
  const oversized = refuseOversizedApproval(call);
  if (oversized) {
    state.toolCalls += 1;
    deps.metrics.toolCalls.inc({ tool: call.toolName, outcome: 'denied' });
    return runCallsUntilApproval(deps, run, state, calls.slice(gated + 1), [...results, oversized], progress);
  }
  state.stage = 'waiting';
  state.pendingApproval = {
    id: `s${state.step}-c${state.toolCalls + 1}`,
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    input: call.input,
    requestedAt: deps.now().toISOString(),
    results,
    remaining: calls.slice(gated + 1),
  };
  return true;
}

const countImages = (results: readonly ToolResultRecord[]) => results.filter((result) => result.image !== undefined).length;
