// How long a run may wait for humans. Time waiting for an approval is not the run's time: it
// moves the run's deadline on, up to the operator's maxApprovalWaitSeconds summed over all the
// run's waits. Past that a wait ends as at spec.approval.timeout and the run goes on, on its
// own time. Without the bound, a run whose model asked at every step held its slot of
// maxActiveRuns and its sandbox pod for maxSteps × approval.timeout (19 years at the largest
// spec) at no token cost. The controller (decide.ts), the worker that records an answer
// (resume-job.ts) and the pod's limit (sandbox-pod.ts) count from these, so they agree.
import { durationMs, type CodingRunStatus, type ParsedCodingRun } from '../api/index.ts';

/** Milliseconds of human time in the run so far: answered approvals, and the one it waits on now. Not the run's time (budget.timeout). */
export function approvalWaitMs(status: CodingRunStatus, now: Date): number {
  const answered = (status.approvalWaitSeconds ?? 0) * 1000;
  const pending = status.phase === 'WaitingForApproval' ? status.pendingApproval : undefined;
  return answered + (pending ? Math.max(0, now.getTime() - Date.parse(pending.requestedAt)) : 0);
}

/** The part of `waitedMs` (all the run's waits) that moves its deadline on: at most `maxMs`; the rest was the run's own time. */
export function countedApprovalWaitMs(waitedMs: number, maxMs: number): number {
  return Math.min(Math.max(0, waitedMs), maxMs);
}

/**
 * How far one answered wait moves the run's start (and deadline) on, after `beforeMs` of waits:
 * what it adds to the counted total. Summed over the run's waits, the shifts are the counted
 * total, whatever order they came in.
 */
export function approvalWaitShiftMs(beforeMs: number, waitedMs: number, maxMs: number): number {
  return countedApprovalWaitMs(beforeMs + waitedMs, maxMs) - countedApprovalWaitMs(beforeMs, maxMs);
}

/** When an unanswered approval ends, and which bound ends it. */
export interface ApprovalWaitEnd {
  /** Epoch ms. */
  at: number;
  /** `timeout`: spec.approval.timeout; `allowance`: the run's waits reach maxApprovalWaitSeconds (or had already). */
  by: 'timeout' | 'allowance';
}

/**
 * The pending approval, asked at `requestedAt` after `answeredMs` of earlier waits, ends
 * unanswered at its approval.timeout or when the run's waits reach `maxMs`, whichever comes
 * first; at once when they had already (a run may ask again, but no longer park).
 */
export function approvalWaitEnd(requestedAt: number, timeoutMs: number, answeredMs: number, maxMs: number): ApprovalWaitEnd {
  const byTimeout = requestedAt + timeoutMs;
  const byAllowance = requestedAt + Math.max(0, maxMs - answeredMs);
  return byAllowance < byTimeout ? { at: byAllowance, by: 'allowance' } : { at: byTimeout, by: 'timeout' };
}

/**
 * The longest a run may wait for humans, as its sandbox pod allows for it: none without
 * approvals; with gated tools the whole `maxMs`, as a step may park once per gated call (up to
 * 64) and maxSteps may be raised after the pod is made (a pod allowing one wait per step was
 * ended by the kubelet mid-approval, the answer lost); with only the publish approval, its one
 * wait (spec.approval cannot change).
 */
export function approvalWaitAllowanceMs(run: ParsedCodingRun, maxMs: number): number {
  const { approval } = run.spec;
  if (approval.tools.length > 0) return maxMs;
  return approval.publish ? Math.min(maxMs, durationMs(approval.timeout)) : 0;
}
