// Every change of a run's phase, as pure functions of (status, what happened, generation,
// now): the controller (decide.ts) and the workers (the step, resume and finalize jobs, and
// failRun) compute a run's status only here, so a run in a phase looks the same whoever put
// it there. Two writers apply the results (the reconciler, and the workers' status writer,
// which also patches step progress on its own: cheaper than a reconcile per step); this is
// the one computation. A message set here may quote text a repository or the model wrote (a
// check's output, a setup script's): it is written on one line, hidden characters spelled out
// (text/one-line-text.ts), so no source has to remember to.
import {
  APPROVALS_KEPT,
  CONDITION_REASONS,
  LIMITS,
  REASONS,
  type AnsweredApproval,
  type CodingRunStatus,
  type PendingApproval,
  type Phase,
  type RunTiming,
} from '../api/index.ts';
import { oneLineText } from '../text/one-line-text.ts';
import { findCondition, setCondition } from './conditions.ts';
import { withPhaseConditions } from './phase-conditions.ts';
import { mergeTimings } from './run-timings.ts';

export type TerminalPhase = 'Succeeded' | 'Failed' | 'Cancelled';

/** status.message of a run the agent works on. */
export const RUNNING_MESSAGE = 'The agent is working.';

/** What a step changes in the status of a running run: its counters. */
export interface RunProgress {
  steps: number;
  toolCalls: number;
  usage: NonNullable<CodingRunStatus['usage']>;
  /** Time spent waiting for approvals so far (status.approvalWaitSeconds), once there was one. */
  approvalWaitSeconds?: number;
  /** Phases timed since the last write (status.timings); entries already there are kept as they are. */
  timings?: readonly RunTiming[];
}

/** A phase that is not terminal, with its reason (or none) and message. True in `changed` when phase or reason differ. */
export function enterPhase(
  status: CodingRunStatus,
  phase: Phase,
  reason: string | undefined,
  message: string,
): { status: CodingRunStatus; changed: boolean } {
  const changed = status.phase !== phase || status.reason !== reason;
  status.phase = phase;
  if (reason === undefined) delete status.reason;
  else status.reason = reason;
  status.message = oneLineText(message, LIMITS.message);
  return { status, changed };
}

/** The status of a run that has just ended, whoever ends it: its terminal conditions, the sandbox and any approval no longer pending. */
export function finishStatus(
  status: CodingRunStatus,
  phase: TerminalPhase,
  reason: string,
  message: string,
  generation: number,
  now: Date,
): CodingRunStatus {
  status.phase = phase;
  status.reason = reason;
  status.message = oneLineText(message, LIMITS.message);
  status.completionTime = now.toISOString();
  delete status.pendingApproval;
  withPhaseConditions(status, generation, now);
  if (findCondition(status.conditions, 'SandboxReady')?.status === 'True') {
    status.conditions = setCondition(
      status.conditions,
      {
        type: 'SandboxReady',
        status: 'False',
        reason: CONDITION_REASONS.RunFinished,
        message: 'The sandbox is removed once the run ends.',
      },
      generation,
      now,
    );
  }
  if (findCondition(status.conditions, 'AwaitingApproval')?.status === 'True') {
    status.conditions = setCondition(
      status.conditions,
      { type: 'AwaitingApproval', status: 'False', reason, message: 'The run ended.' },
      generation,
      now,
    );
  }
  return status;
}

/** A run fails: the terminal status with its reason and message. */
export function failStatus(status: CodingRunStatus, reason: string, message: string, generation: number, now: Date): CodingRunStatus {
  return finishStatus(status, 'Failed', reason, message, generation, now);
}

export function recordProgress(status: CodingRunStatus, progress: RunProgress): CodingRunStatus {
  status.steps = progress.steps;
  status.toolCalls = progress.toolCalls;
  status.usage = { ...progress.usage };
  if (progress.approvalWaitSeconds !== undefined) status.approvalWaitSeconds = progress.approvalWaitSeconds;
  if (progress.timings?.length) status.timings = mergeTimings(status.timings, progress.timings);
  return status;
}

/** After a step that parked a call for a human: WaitingForApproval, the whole call shown (Security #11.5). */
export function awaitApprovalStatus(
  status: CodingRunStatus,
  progress: RunProgress,
  pending: PendingApproval,
  runName: string,
  generation: number,
  now: Date,
): CodingRunStatus {
  recordProgress(status, progress);
  enterPhase(
    status,
    'WaitingForApproval',
    status.reason,
    `Waiting for approval of a ${pending.toolName} call: kubectl codingrun approve ${runName} (or deny).`,
  );
  status.pendingApproval = pending;
  status.conditions = setCondition(
    status.conditions,
    {
      type: 'AwaitingApproval',
      status: 'True',
      reason: CONDITION_REASONS.ToolCallNeedsApproval,
      message: `A ${pending.toolName} call waits for approval (id ${pending.id}).`,
    },
    generation,
    now,
  );
  return withPhaseConditions(status, generation, now);
}

/** After a step that goes on (or was resumed after an approval): Running, no approval pending. */
export function runningAfterStepStatus(status: CodingRunStatus, progress: RunProgress, generation: number, now: Date): CodingRunStatus {
  recordProgress(status, progress);
  enterPhase(status, 'Running', status.reason, RUNNING_MESSAGE);
  delete status.pendingApproval;
  if (status.conditions?.some((condition) => condition.type === 'AwaitingApproval')) {
    status.conditions = setCondition(
      status.conditions,
      { type: 'AwaitingApproval', status: 'False', reason: CONDITION_REASONS.NoPendingCall, message: 'No tool call waits for approval.' },
      generation,
      now,
    );
  }
  return withPhaseConditions(status, generation, now);
}

/** An answered approval joins status.approvals (the latest APPROVALS_KEPT); answering the same id again changes nothing. */
export function recordAnsweredApproval(status: CodingRunStatus, answered: AnsweredApproval): CodingRunStatus {
  const earlier = (status.approvals ?? []).filter((each) => each.id !== answered.id);
  status.approvals = [...earlier, answered].slice(-APPROVALS_KEPT);
  return status;
}

/** An approval was refused (its sha256 is not the input's): the call stays pending, the message says why. */
export function refusedApprovalStatus(status: CodingRunStatus, message: string): CodingRunStatus {
  if (status.phase === 'WaitingForApproval') status.message = oneLineText(message, LIMITS.message);
  return status;
}

/** How the agent's loop ended, for the finalize job. */
export interface LoopEnd {
  steps: number;
  /** Set when the loop stopped early (a budget, the deadline, a model that cannot call tools). */
  stop?: { reason: string; message: string } | undefined;
  filesChanged: number;
}

/** The terminal phase, reason and message of a run whose loop ended (the finalize job writes it). */
export function loopOutcome(end: LoopEnd): { phase: 'Succeeded' | 'Failed'; reason: string; message: string } {
  if (end.stop) return { phase: 'Failed', reason: end.stop.reason, message: end.stop.message };
  return {
    phase: 'Succeeded',
    reason: REASONS.Completed,
    message: `Finished in ${end.steps} step(s): ${end.filesChanged} file(s) changed.`,
  };
}
