// Security #11.5: a human approves exactly what runs. What a call waiting for approval shows
// (status.pendingApproval: the whole input as JSON, its size and sha256), which calls cannot
// wait because their input is too large to show whole, and whether an approval binds to the
// input the resume job is about to run. Pure; run-tool-calls.ts, end-step.ts and resume-job.ts apply it.
import { LIMITS, type PendingApproval } from '../api/index.ts';
import { approvalInputJson, approvalInputSha256, type ApprovalAnswer } from '../reconcile/approval-answer.ts';
import { storedTextBytes } from '../text/stored-json-bytes.ts';
import type { PendingToolCall, ToolResultRecord } from './run-state.ts';

/** status.pendingApproval for a parked call: never a cut (oversized calls never park). */
export function pendingApprovalView(pending: { id: string; toolName: string; input: unknown; requestedAt: string }): PendingApproval {
  const input = approvalInputJson(pending.input);
  return {
    id: pending.id,
    toolName: pending.toolName,
    input,
    inputBytes: Buffer.byteLength(input, 'utf8'),
    inputSha256: approvalInputSha256(input),
    requestedAt: pending.requestedAt,
  };
}

const EVENT_PREVIEW_CHARACTERS = 300;

/** The start of the input for an Event, marked when cut: Events are not where approvers read. */
export function previewInput(input: unknown): string {
  const json = approvalInputJson(input);
  if (json.length <= EVENT_PREVIEW_CHARACTERS) return json;
  return `${json.slice(0, EVENT_PREVIEW_CHARACTERS)}… (cut: ${Buffer.byteLength(json, 'utf8')} bytes in all; kubectl codingrun get shows it whole)`;
}

/**
 * The denial of a gated call whose input is too large to be shown whole in the status, or
 * undefined when it may wait for a human. Nobody can approve what nobody can read, and a
 * cut would be approved in place of the whole; the model is told how to go on. Measured as the
 * API server stores the input (text/stored-json-bytes.ts): 60 000 `<` were 60 KB in UTF-8 and
 * 360 KB in etcd, beside the rest of the run.
 */
export function refuseOversizedApproval(call: PendingToolCall): ToolResultRecord | undefined {
  const bytes = storedTextBytes(approvalInputJson(call.input));
  if (bytes <= LIMITS.pendingApprovalInput) return undefined;
  return {
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    ok: false,
    text:
      `DENIED: this ${call.toolName} call needs a human's approval, and its input (${bytes} bytes as the API server stores it) is larger than the ` +
      `${LIMITS.pendingApprovalInput} bytes an approver can be shown whole. Split it into smaller calls.`,
  };
}

/**
 * Why an approval must not run the parked call, or undefined when it may: an approve must
 * carry the sha256 of the exact input about to run. A deny needs no digest.
 */
export function approvalRefusal(answer: ApprovalAnswer, call: { id: string; toolName: string; input: unknown }): string | undefined {
  if (answer.decision !== 'approve') return undefined;
  const expected = approvalInputSha256(approvalInputJson(call.input));
  if (answer.sha256 === expected) return undefined;
  const carried = answer.sha256 ? `sha256 ${answer.sha256}` : 'no sha256';
  return (
    `Refused the approval of ${call.toolName} call ${call.id}: it carried ${carried}, but the input to run has sha256 ${expected}; ` +
    'nothing ran and the call still waits. Read the input with kubectl codingrun get NAME --input and approve what you read ' +
    '(kubectl codingrun approve NAME --sha256 HASH), or deny it.'
  );
}
