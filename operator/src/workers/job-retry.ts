// How a failed agent job is retried. Jobs fail mostly for reasons outside the run: a
// dropped exec stream, an API server or Redis that restarts. The tries are spread over a
// minute and a half, so a run rides out a control-plane restart instead of failing as
// AgentFailed after fifteen seconds; the job's own logic decides when a run fails for good.

export const JOB_ATTEMPTS = 10;
/** The backoff type jobs carry; the worker's backoffStrategy computes it (BullMQ has no cap). */
export const JOB_BACKOFF_TYPE = 'capped-exponential';

const FIRST_DELAY_MS = 1_000;
const MAX_DELAY_MS = 15_000;

/** Delay before the next try after `attemptsMade` tries: 1 s, 2 s, 4 s, 8 s, then 15 s. */
export function jobRetryDelayMs(attemptsMade: number): number {
  return Math.min(FIRST_DELAY_MS * 2 ** Math.max(0, attemptsMade - 1), MAX_DELAY_MS);
}

/**
 * Tries for a job the API server refused as forbidden (RBAC lacks a verb). Such a refusal
 * is an install problem an admin must fix, and ten tries over a minute and a half only
 * delay the message that says so; a few tries over about 7 s still outlast an authorizer
 * that is catching up after an API server restart.
 */
export const FORBIDDEN_ATTEMPTS = 4;

/** True when the error is the API server's authorizer saying no (HTTP 403). */
export function isForbidden(error: unknown): boolean {
  if ((error as { code?: unknown } | undefined)?.code === 403) return true;
  const message = error instanceof Error ? error.message : String(error);
  // client-node's ApiException, and the exec WebSocket's refused upgrade.
  return /HTTP-Code: 403\b|Unexpected server response: 403\b|"reason":\s*"Forbidden"/.test(message);
}
