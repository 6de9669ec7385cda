// approve/deny as a decision on the run the user named: which id to answer, and the
// annotation value that answers it (API.md "Approvals"). Pure; the adapter writes it.
import type { CodingRun } from '../api/index.ts';
import { ApprovalIdMismatchError } from './errors/approval-id-mismatch-error.ts';
import { NothingPendingError } from './errors/nothing-pending-error.ts';

export interface ApprovalAnswer {
  id: string;
  decision: 'approve' | 'deny';
  reason?: string;
}

export interface AnswerRequest {
  decision: 'approve' | 'deny';
  /** The id the user expects to answer (--id); undefined answers whatever is pending. */
  id?: string;
  reason?: string;
}

/**
 * The answer to write, or NothingPendingError / ApprovalIdMismatchError. A run counts as
 * waiting when it has status.pendingApproval and its phase is WaitingForApproval: a stale
 * pendingApproval left on a run that moved on would be answered in vain.
 */
export function answerFor(run: CodingRun, request: AnswerRequest): ApprovalAnswer {
  const pending = run.status?.pendingApproval;
  if (!pending || run.status?.phase !== 'WaitingForApproval') throw new NothingPendingError(run.metadata.name, run.status?.phase);
  if (request.id !== undefined && request.id !== pending.id) {
    throw new ApprovalIdMismatchError(run.metadata.name, request.id, pending.id, pending.toolName);
  }
  return { id: pending.id, decision: request.decision, ...(request.reason ? { reason: request.reason } : {}) };
}

/** The annotation value: compact JSON with the keys in the documented order. */
export function encodeAnswer(answer: ApprovalAnswer): string {
  return JSON.stringify({ id: answer.id, decision: answer.decision, ...(answer.reason !== undefined ? { reason: answer.reason } : {}) });
}
