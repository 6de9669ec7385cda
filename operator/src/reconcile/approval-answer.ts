// The chamvi.dev/approval annotation, the one wire format of a human's answer to a pending
// approval: written by `kubectl codingrun approve|deny`, read by decide(), carried to the
// resume job. An approval names the sha256 of the input it approves (the hex digest of the
// UTF-8 bytes of the call's input as JSON, as status.pendingApproval shows it), and the
// resume job runs the call only when that digest is the digest of the exact input it is
// about to run: a human approves exactly what runs, never a cut or a changed call. The
// annotation's name, its encoder and its decoder live here and nowhere else. Pure.
import { createHash } from 'node:crypto';
import { GROUP, type CodingRun } from '../api/index.ts';
import { cutUserName } from './user-name.ts';

/** The annotation `kubectl codingrun approve|deny` writes on the run (API.md "Approvals"). */
export const APPROVAL_ANNOTATION = `${GROUP}/approval`;
/**
 * Who answers: the user name, written beside the answer in the same request. The chart's
 * ValidatingAdmissionPolicy (templates/approval-policy.yaml) refuses a request that sets
 * either annotation unless this one is request.userInfo.username, so with the policy
 * installed it is the API server's word, not the client's (docs/approvals.md).
 */
export const APPROVER_ANNOTATION = `${GROUP}/approver`;
/** The run's creator, required at creation by the policy when separation of duties is on; never an approver. */
export const CREATOR_ANNOTATION = `${GROUP}/created-by`;

/**
 * The creator annotation of a run the operator makes for a CodingSchedule or a CodingEval: the
 * one the owner carries (with separation of duties on, the policy makes it the user who wrote
 * the owner's spec last), never one from the owner's run template, which its author could set
 * to anyone. Without one there is none, and with the policy on, the run is refused: a run
 * whose creator is the operator could be approved by the very person who wrote its task.
 */
export function creatorOf(owner: { metadata: { annotations?: Record<string, string> } }): Record<string, string> {
  const creator = owner.metadata.annotations?.[CREATOR_ANNOTATION];
  return creator ? { [CREATOR_ANNOTATION]: creator } : {};
}
/**
 * Who last wrote the CodingRunTemplate a scheduled run's task comes from: the template's own
 * creator annotation (with separation of duties on, the policy makes it that user), copied by
 * the operator when it makes the run. That user wrote the task as much as the schedule's
 * writer did, and may not answer the run's approvals either; the policy keeps the annotation
 * as the run was created with it.
 */
export const TEMPLATE_WRITER_ANNOTATION = `${GROUP}/template-written-by`;

export function templateWriterOf(template: { metadata: { annotations?: Record<string, string> } } | undefined): Record<string, string> {
  const writer = template?.metadata.annotations?.[CREATOR_ANNOTATION];
  return writer ? { [TEMPLATE_WRITER_ANNOTATION]: writer } : {};
}

export interface ApprovalAnswer {
  id: string;
  decision: 'approve' | 'deny';
  reason?: string;
  /** approve: sha256 (64 lowercase hex) of the input approved. A deny needs none. */
  sha256?: string;
  /** Who answered: the chamvi.dev/approver annotation, when there is one, cut to USER_NAME_MAX code points (user-name.ts). */
  user?: string;
  /** The operator denied the call because nobody answered within spec.approval.timeout. */
  timedOut?: boolean;
}

export type AnnotationReading = { kind: 'none' } | { kind: 'answer'; answer: ApprovalAnswer } | { kind: 'invalid'; message: string };

export const SHA256_PATTERN = /^[0-9a-f]{64}$/;
const REASON_MAX = 1024;

/** The digest an approval names: sha256 hex of the input's JSON text. */
export function approvalInputSha256(inputJson: string): string {
  return createHash('sha256').update(inputJson, 'utf8').digest('hex');
}

/** The call's input as the JSON text an approver reads and hashes. */
export const approvalInputJson = (input: unknown): string => JSON.stringify(input) ?? 'null';

/**
 * Whether the resume job would act on `answer` for the call whose input is `inputJson` (as
 * status.pendingApproval shows it): a deny always, an approve only when it names the input's
 * digest (the job's own check, workers/approval-input.ts approvalRefusal).
 */
export function answerActsOn(answer: ApprovalAnswer, inputJson: string): boolean {
  return answer.decision === 'deny' || answer.sha256 === approvalInputSha256(inputJson);
}

/** The annotation value: compact JSON with the keys in the documented order. */
export function encodeApprovalAnnotation(answer: ApprovalAnswer): string {
  return JSON.stringify({
    id: answer.id,
    decision: answer.decision,
    ...(answer.sha256 !== undefined ? { sha256: answer.sha256 } : {}),
    ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
  });
}

export function readApprovalAnnotation(run: CodingRun): AnnotationReading {
  const reading = decodeApprovalAnnotation(run.metadata.annotations?.[APPROVAL_ANNOTATION]);
  // Cut as the writers' names are recorded; separation of duties refuses a name that was cut.
  const approver = run.metadata.annotations?.[APPROVER_ANNOTATION];
  const user = approver === undefined ? undefined : cutUserName(approver);
  if (reading.kind !== 'answer' || !user) return reading;
  return { kind: 'answer', answer: { ...reading.answer, user } };
}

/** The annotation's value, read: none, an answer, or why it is not one. */
export function decodeApprovalAnnotation(raw: string | undefined): AnnotationReading {
  if (raw === undefined || raw === '') return { kind: 'none' };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { kind: 'invalid', message: `annotation ${APPROVAL_ANNOTATION} is not JSON; use kubectl codingrun approve|deny` };
  }
  const { id, decision, reason, sha256 } = (value ?? {}) as Record<string, unknown>;
  if (typeof id !== 'string' || (decision !== 'approve' && decision !== 'deny')) {
    return {
      kind: 'invalid',
      message: `annotation ${APPROVAL_ANNOTATION} needs {"id": "...", "decision": "approve"|"deny", "sha256": "..."}`,
    };
  }
  if (sha256 !== undefined && (typeof sha256 !== 'string' || !SHA256_PATTERN.test(sha256))) {
    return {
      kind: 'invalid',
      message: `annotation ${APPROVAL_ANNOTATION}: sha256 must be 64 lowercase hex digits, the digest of the input approved`,
    };
  }
  return {
    kind: 'answer',
    answer: {
      id,
      decision,
      ...(typeof sha256 === 'string' ? { sha256 } : {}),
      ...(typeof reason === 'string' && reason ? { reason: reason.slice(0, REASON_MAX) } : {}),
    },
  };
}
