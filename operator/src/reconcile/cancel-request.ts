// The chamvi.dev/cancel annotation, the one wire format of a request to stop a run: written
// by `kubectl codingrun cancel NAME [--reason TEXT]`, read by decide(). An annotation, not a
// spec field: a GitOps tool (Argo CD, Flux) applies only the fields its manifest names, so an
// annotation the manifest lacks survives a sync, while a spec field would be part of the
// desired state (a sync could undo a cancel, or a manifest re-applied with it cancel a new
// run) and would bump the generation. The operator only reads it, never writes it. Pure.
import { GROUP, type CodingRun } from '../api/index.ts';

export const CANCEL_ANNOTATION = `${GROUP}/cancel`;

/** The reason is shown in status.message; bounded so a long one cannot crowd out the rest. */
export const CANCEL_REASON_MAX = 1024;

export interface CancelRequest {
  /** Who asked, in their words; empty when none was given. */
  reason: string;
}

/** The annotation's value: the reason as plain text (an empty value still cancels). */
export function encodeCancelAnnotation(reason: string | undefined): string {
  return (reason ?? '').slice(0, CANCEL_REASON_MAX);
}

/** A cancel request when the run carries the annotation (any value, even empty). */
export function readCancelRequest(run: CodingRun): CancelRequest | undefined {
  const raw = run.metadata.annotations?.[CANCEL_ANNOTATION];
  if (raw === undefined) return undefined;
  return { reason: raw.replace(/\s+/g, ' ').trim().slice(0, CANCEL_REASON_MAX) };
}

/** status.message of a cancelled run. */
export function cancelledMessage(request: CancelRequest, phase: string | undefined): string {
  const why = request.reason ? `: ${request.reason}` : '';
  return `Cancelled by request (annotation ${CANCEL_ANNOTATION}) while ${phase ?? 'Pending'}${why}.`;
}
