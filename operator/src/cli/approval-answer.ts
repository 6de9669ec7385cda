// approve/deny as a decision on the run the user named: which id to answer, what the
// approver must have seen, and the annotation value that answers it (API.md "Approvals";
// the wire format is reconcile/approval-answer.ts). Security #11.5: an approve carries the
// sha256 of the input it approves, and the operator runs the call only when that digest is
// the digest of what it runs. approve shows the input whole before it answers; an input too
// long to show is approved only with --sha256, taken from `get NAME --input`; and with --uid
// (in every command the plugin prints) an answer binds the run its sender read, not the name. Pure.
import type { CodingRun, PendingApproval } from '../api/index.ts';
import {
  APPROVAL_ANNOTATION,
  APPROVER_ANNOTATION,
  approvalInputSha256,
  encodeApprovalAnnotation,
  type ApprovalAnswer,
} from '../reconcile/approval-answer.ts';
import { ApprovalIdMismatchError } from './errors/approval-id-mismatch-error.ts';
import { ApprovalInputError } from './errors/approval-input-error.ts';
import { NothingPendingError } from './errors/nothing-pending-error.ts';
import { RunReplacedError } from './errors/run-replaced-error.ts';

export type { ApprovalAnswer };

/** approve and get NAME print the pending input whole up to this size; a longer one is read with get --input. */
export const SHOWN_INPUT_MAX_BYTES = 16_384;

export interface AnswerRequest {
  decision: 'approve' | 'deny';
  /** The id the user expects to answer (--id); undefined answers whatever is pending. */
  id?: string;
  reason?: string;
  /** approve --sha256: the digest of the input the approver read; an approve needs it. */
  sha256?: string;
}

export interface PendingInput {
  /** status.pendingApproval.input, as stored. */
  text: string;
  bytes: number;
  sha256: string;
  /** True when text is provably the whole input: its size and sha256 are the ones the operator wrote. */
  whole: boolean;
  /** True when approve and get NAME show it in full (whole and at most SHOWN_INPUT_MAX_BYTES). */
  shownByApprove: boolean;
}

/** What the plugin can say about a pending input: its digest, and whether it is the whole call. */
export function pendingInput(pending: PendingApproval): PendingInput {
  const bytes = Buffer.byteLength(pending.input, 'utf8');
  const sha256 = approvalInputSha256(pending.input);
  // An operator that cut the input (before Security #11.5) wrote no digest: never "whole".
  const whole = pending.inputSha256 === sha256 && pending.inputBytes === bytes;
  return { text: pending.input, bytes, sha256, whole, shownByApprove: whole && bytes <= SHOWN_INPUT_MAX_BYTES };
}

/**
 * The command that approves exactly this call of this run, as get NAME, get NAME --input and a
 * bare approve print it: the name finds the run, --uid refuses another one re-created under the
 * name since, --id and --sha256 refuse another call or another input.
 */
export function approveCommand(run: CodingRun, namespace: string, pending: PendingApproval, sha256: string): string {
  return `kubectl codingrun approve ${run.metadata.name} -n ${namespace} --id ${pending.id} --sha256 ${sha256} --uid ${run.metadata.uid}`;
}

/** The deny that answers only this call of this run (as approveCommand), its reason left to write. */
export function denyCommand(run: CodingRun, namespace: string, pending: PendingApproval): string {
  return `kubectl codingrun deny ${run.metadata.name} -n ${namespace} --id ${pending.id} --uid ${run.metadata.uid} --reason TEXT`;
}

/**
 * RunReplacedError when approve/deny --uid names another run than the one holding the name now.
 * The name, the call id and even the sha256 do not tell two runs apart: a run deleted and
 * re-created under its name asks its first call as s1-c1 again, with the same input when its
 * model is scripted. Without --uid (scripts older than it) the answer binds the run read now.
 */
export function requireSameRun(run: CodingRun, uid: string | undefined, decision: 'approve' | 'deny'): void {
  if (uid !== undefined && uid !== run.metadata.uid) {
    throw new RunReplacedError(run.metadata.name, run.metadata.namespace, uid, run.metadata.uid, decision);
  }
}

/** The call the run waits for, or NothingPendingError / ApprovalIdMismatchError (with id, when it is another). */
export function waitingCall(run: CodingRun, id: string | undefined): PendingApproval {
  const pending = run.status?.pendingApproval;
  if (!pending || run.status?.phase !== 'WaitingForApproval') throw new NothingPendingError(run.metadata.name, run.status?.phase);
  if (id !== undefined && id !== pending.id) throw new ApprovalIdMismatchError(run.metadata.name, id, pending.id, pending.toolName);
  return pending;
}

/**
 * The answer to write, or NothingPendingError / ApprovalIdMismatchError / ApprovalInputError.
 * A run counts as waiting when it has status.pendingApproval and its phase is
 * WaitingForApproval: a stale pendingApproval left on a run that moved on would be answered
 * in vain. An approve needs the sha256 of the input its sender read.
 */
export function answerFor(run: CodingRun, request: AnswerRequest): ApprovalAnswer {
  const name = run.metadata.name;
  const pending = waitingCall(run, request.id);
  const reason = request.reason ? { reason: request.reason } : {};
  if (request.decision === 'deny') return { id: pending.id, decision: 'deny', ...reason };
  const input = pendingInput(pending);
  const readIt = `read it with kubectl codingrun get ${name} --input, then approve with --id ${pending.id} --sha256 HASH --uid ${run.metadata.uid} as it prints`;
  if (request.sha256 === undefined) {
    throw new ApprovalInputError(
      `approve needs --sha256, the sha256 of the input of ${pending.toolName} call ${pending.id} you read; ${readIt}`,
    );
  }
  if (request.sha256 !== input.sha256) {
    throw new ApprovalInputError(
      `the input of ${pending.toolName} call ${pending.id} has sha256 ${input.sha256}, not ${request.sha256}: it is not the input you read; ${readIt}`,
    );
  }
  if (!input.whole) {
    throw new ApprovalInputError(
      `status.pendingApproval of codingrun "${name}" does not hold the whole input of call ${pending.id} (its size or sha256 does not match ` +
        'what the operator recorded); nobody can read what would run, so it cannot be approved: deny it',
    );
  }
  return { id: pending.id, decision: 'approve', sha256: input.sha256, ...reason };
}

/**
 * The annotations an answer writes, in one request: the answer and who gives it. `user` is the
 * caller's user name as the API server knows it (SelfSubjectReview, `kubectl auth whoami`):
 * the chart's approval policy refuses any other name (#15.5).
 */
export function answerAnnotations(answer: ApprovalAnswer, user: string): Record<string, string> {
  return { [APPROVAL_ANNOTATION]: encodeApprovalAnnotation(answer), [APPROVER_ANNOTATION]: user };
}
