// Node's timers take at most 2^31 - 1 ms (about 24.8 days); a longer delay fires after 1 ms,
// with only a warning. Every delay that comes from a user's figure (a run's ttlSecondsAfterFinished
// of 30 days, a budget.timeout of 720h) goes through here: a timer that fires early is set again
// by whoever it wakes (a reconcile decides again; a step's deadline is checked against the clock).

export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** The delay a timer can take: ms, at most MAX_TIMER_DELAY_MS. */
export function timerDelay(ms: number): number {
  return Math.min(ms, MAX_TIMER_DELAY_MS);
}
