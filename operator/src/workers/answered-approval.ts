// A human's (or the timeout's) answer to an approval as the run records it (#15.5): the
// transcript's entry, the status.approvals entry and the Event's words. A tool call's answer
// and the publish answer are recorded alike, so every answer names its user.
import type { AnsweredApproval } from '../api/index.ts';
import type { TranscriptApproval } from '../record/transcript-entry.ts';
import type { ApprovalAnswer } from '../reconcile/run-agent.ts';
import type { PendingApprovalState } from './run-state.ts';

/** The answer to `pending`, as the transcript records it. */
export function answeredApproval(pending: PendingApprovalState, answer: ApprovalAnswer, answeredAt: Date): TranscriptApproval {
  return {
    id: pending.id,
    tool: pending.toolName,
    decision: answer.decision,
    ...(answer.reason ? { reason: answer.reason } : {}),
    ...(answer.sha256 ? { sha256: answer.sha256 } : {}),
    requestedAt: pending.requestedAt,
    answeredAt: answeredAt.toISOString(),
    ...(answer.user ? { user: answer.user } : {}),
    ...(answer.timedOut ? { timedOut: true } : {}),
  };
}

/** The status.approvals entry of an answer; its reason cut to the field's bound. */
export function answeredApprovalView(approval: TranscriptApproval): AnsweredApproval {
  return {
    id: approval.id,
    toolName: approval.tool,
    decision: approval.decision,
    ...(approval.user ? { user: approval.user } : {}),
    ...(approval.timedOut ? { timedOut: true } : {}),
    ...(approval.reason ? { reason: approval.reason.slice(0, 1024) } : {}),
    requestedAt: approval.requestedAt,
    answeredAt: approval.answeredAt,
  };
}

/** " by alice" for an Event, or why nobody is named. */
export function answeredBy(approval: Pick<TranscriptApproval, 'user' | 'timedOut'>): string {
  if (approval.timedOut) return ' (timeout)';
  return approval.user ? ` by ${approval.user}` : ' (approver not recorded)';
}
