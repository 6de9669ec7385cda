// Runs one model call under the calling policy: a per-attempt timeout, bounded exponential
// backoff with jitter on transient failures (Retry-After honoured, capped), ModelAuthFailed
// at once, ModelUnavailable when the attempts run out. Pure apart from the injected clock.

import type { CallingPolicy, CallingPolicyDependencies } from './calling-policy.ts';
import { backoffDelayMs } from './calling-policy.ts';
import { classifyModelError } from './classify-model-error.ts';
import { redactSecrets } from './redact-secrets.ts';
import { ModelTimeoutError } from './errors/model-timeout-error.ts';
import { ModelUnavailableError } from './errors/model-unavailable-error.ts';

export interface RetryEvent {
  /** The attempt that failed, 1-based. */
  readonly attempt: number;
  readonly delayMs: number;
  readonly problem: string;
  readonly statusCode: number | undefined;
}

export interface CallWithPolicyOptions {
  /** Provider name, for messages. */
  readonly provider: string;
  readonly policy: CallingPolicy;
  readonly dependencies: CallingPolicyDependencies;
  /** The caller's cancellation (run deleted, deadline): stops at once, rethrowing its reason. */
  readonly abortSignal?: AbortSignal | undefined;
  /** Values that must never appear in an error message (the API key). */
  readonly secrets?: readonly (string | undefined)[];
  /** Told about each retry before its delay, e.g. to log it. */
  readonly onRetry?: (event: RetryEvent) => void;
}

/**
 * Calls `attempt` until it succeeds or the policy says stop. `attempt` receives a signal that
 * aborts when its time is up or the caller cancels; it is also raced against that signal, so
 * an implementation that ignores the signal still cannot hang the run.
 */
export async function callWithPolicy<T>(attempt: (signal: AbortSignal) => PromiseLike<T>, options: CallWithPolicyOptions): Promise<T> {
  const { policy, dependencies, abortSignal } = options;
  for (let attemptNumber = 1; ; attemptNumber += 1) {
    abortSignal?.throwIfAborted();
    let error: unknown;
    try {
      return await runAttempt(attempt, options);
    } catch (caught) {
      error = caught;
    }
    if (abortSignal?.aborted) throw abortSignal.reason;

    const classification = classifyModelError(error, {
      provider: options.provider,
      now: dependencies.now(),
      secrets: options.secrets ?? [],
    });
    if (classification.kind === 'unknown') throw withoutSecrets(error, options.secrets ?? []);
    if (classification.kind === 'fatal') throw classification.error;
    if (attemptNumber >= policy.maxAttempts) {
      throw new ModelUnavailableError({
        provider: options.provider,
        attempts: attemptNumber,
        ...(classification.statusCode === undefined ? {} : { lastStatusCode: classification.statusCode }),
        lastProblem: classification.problem,
        cause: error,
      });
    }
    const delayMs =
      classification.retryAfterMs === undefined
        ? backoffDelayMs(policy, attemptNumber, dependencies.random())
        : Math.min(classification.retryAfterMs, policy.maxRetryAfterMs);
    options.onRetry?.({ attempt: attemptNumber, delayMs, problem: classification.problem, statusCode: classification.statusCode });
    await dependencies.sleep(delayMs, abortSignal);
  }
}

async function runAttempt<T>(attempt: (signal: AbortSignal) => PromiseLike<T>, options: CallWithPolicyOptions): Promise<T> {
  const controller = new AbortController();
  const timeout = new ModelTimeoutError({ provider: options.provider, timeoutMs: options.policy.attemptTimeoutMs });
  const cancelTimer = options.dependencies.startTimer(options.policy.attemptTimeoutMs, () => controller.abort(timeout));
  const onCallerAbort = () => controller.abort(options.abortSignal?.reason);
  options.abortSignal?.addEventListener('abort', onCallerAbort, { once: true });
  try {
    const pending = Promise.resolve(attempt(controller.signal));
    // The loser of the race may reject later; that rejection is expected and must not
    // surface as an unhandled rejection.
    pending.catch(() => undefined);
    return await Promise.race([pending, rejectOnAbort<T>(controller.signal)]);
  } catch (error) {
    // The SDK turns our abort into an AbortError; report the timeout that caused it instead.
    if (controller.signal.aborted && controller.signal.reason === timeout) throw timeout;
    throw error;
  } finally {
    cancelTimer();
    options.abortSignal?.removeEventListener('abort', onCallerAbort);
  }
}

function rejectOnAbort<T>(signal: AbortSignal): Promise<T> {
  return new Promise<T>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * An error the policy does not know goes on as it is, unless its message holds a secret (a
 * header value fetch refused, quoted whole): then as a plain Error with the secret redacted
 * and no cause, since whatever logs or reports it may walk the cause.
 */
function withoutSecrets(error: unknown, secrets: readonly (string | undefined)[]): unknown {
  if (!(error instanceof Error)) return error;
  const message = redactSecrets(error.message, secrets);
  return message === error.message ? error : new Error(message);
}
