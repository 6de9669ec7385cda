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
