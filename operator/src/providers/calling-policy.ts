// How hard to try one model call: the per-attempt timeout and the bounded retry schedule.
// Pure data plus the injected time source, so tests run the whole schedule instantly.

export interface CallingPolicy {
  /** One attempt (request until the full response, or until the stream ends) may take this long. */
  readonly attemptTimeoutMs: number;
  /** Attempts in total, the first included; 1 disables retries. */
  readonly maxAttempts: number;
  /** Delay before the first retry, before jitter. */
  readonly initialBackoffMs: number;
  /** Each further retry waits this many times longer... */
  readonly backoffFactor: number;
  /** ...up to this bound. */
  readonly maxBackoffMs: number;
  /** A provider's Retry-After is honoured up to this bound, so a hostile or confused header cannot park a run for hours. */
  readonly maxRetryAfterMs: number;
}

export const DEFAULT_CALLING_POLICY: CallingPolicy = Object.freeze({
  // Reasoning models can think for minutes before the first byte of a non-streamed answer.
  attemptTimeoutMs: 300_000,
  maxAttempts: 5,
  initialBackoffMs: 1_000,
  backoffFactor: 2,
  maxBackoffMs: 30_000,
  maxRetryAfterMs: 60_000,
});

/** The time source and randomness the policy uses; injected so tests need no real waiting. */
export interface CallingPolicyDependencies {
  /** Wall-clock milliseconds, used to read an HTTP-date Retry-After. */
  now(): number;
  /** Waits `ms`; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `callback` after `ms` unless the returned cancel function runs first. */
  startTimer(ms: number, callback: () => void): () => void;
  /** Uniform in [0, 1), for jitter. */
  random(): number;
}

export function createSystemCallingPolicyDependencies(): CallingPolicyDependencies {
  return {
    now: () => Date.now(),
    sleep: (ms, signal) =>
      new Promise<void>((resolve, reject) => {
        if (signal?.aborted) {
          reject(signal.reason);
          return;
        }
        const onAbort = () => {
          clearTimeout(timer);
          reject(signal?.reason);
        };
        const timer = setTimeout(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }, ms);
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    startTimer: (ms, callback) => {
      const timer = setTimeout(callback, ms);
      return () => clearTimeout(timer);
    },
    random: () => Math.random(),
  };
}

/**
 * Delay before retry number `retry` (1 for the first retry). Exponential with "equal jitter":
 * between half and all of the exponential value, so replicas that failed together do not
 * retry together, yet no retry comes sooner than half the schedule.
 */
export function backoffDelayMs(policy: CallingPolicy, retry: number, random: number): number {
  const exponential = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.backoffFactor ** (retry - 1));
  return Math.round(exponential / 2 + (random * exponential) / 2);
}
