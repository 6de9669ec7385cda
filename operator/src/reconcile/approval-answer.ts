// Reading a human's answer to a pending approval from the chamvi.dev/approval annotation
// (written by `kubectl codingrun approve|deny`). Pure.
import { APPROVAL_ANNOTATION, type CodingRun } from '../api/index.ts';

export interface ApprovalAnswer {
  id: string;
  decision: 'approve' | 'deny';
  reason?: string;
}

export type AnnotationReading = { kind: 'none' } | { kind: 'answer'; answer: ApprovalAnswer } | { kind: 'invalid'; message: string };

export function readApprovalAnnotation(run: CodingRun): AnnotationReading {
  const raw = run.metadata.annotations?.[APPROVAL_ANNOTATION];
  if (raw === undefined || raw === '') return { kind: 'none' };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { kind: 'invalid', message: `annotation ${APPROVAL_ANNOTATION} is not JSON; use kubectl codingrun approve|deny` };
  }
  const { id, decision, reason } = (value ?? {}) as Record<string, unknown>;
  if (typeof id !== 'string' || (decision !== 'approve' && decision !== 'deny')) {
    return { kind: 'invalid', message: `annotation ${APPROVAL_ANNOTATION} needs {"id": "...", "decision": "approve"|"deny"}` };
  }
  return { kind: 'answer', answer: { id, decision, ...(typeof reason === 'string' && reason ? { reason: reason.slice(0, 1024) } : {}) } };
}
