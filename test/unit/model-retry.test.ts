import { APICallError } from 'ai';
import { describe, expect, it } from 'vitest';
import { callWithPolicy } from '../../operator/src/providers/call-with-policy.ts';
import { backoffDelayMs, type CallingPolicy, type CallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { ModelAuthFailedError } from '../../operator/src/providers/errors/model-auth-failed-error.ts';
import { ModelRequestRejectedError } from '../../operator/src/providers/errors/model-request-rejected-error.ts';
import { ModelTimeoutError } from '../../operator/src/providers/errors/model-timeout-error.ts';
import { ModelUnavailableError } from '../../operator/src/providers/errors/model-unavailable-error.ts';
import { retryAfterMs } from '../../operator/src/providers/retry-after.ts';

const policy: CallingPolicy = {
  attemptTimeoutMs: 10_000,
  maxAttempts: 4,
  initialBackoffMs: 1_000,
  backoffFactor: 2,
  maxBackoffMs: 3_000,
  maxRetryAfterMs: 20_000,
};

const API_KEY = 'sk-live-0123456789abcdef';

/** Instant time: sleeps are recorded, timers fire only when the test says so. */
function fakeTime(random = 0.5) {
  const sleeps: number[] = [];
  const timers: Array<{ ms: number; fire: () => void; cancelled: boolean }> = [];
  const dependencies: CallingPolicyDependencies = {
    now: () => Date.parse('2030-01-01T00:00:00Z'),
    sleep: async (ms, signal) => {
      signal?.throwIfAborted();
      sleeps.push(ms);
    },
    startTimer: (ms, callback) => {
      const timer = { ms, fire: callback, cancelled: false };
      timers.push(timer);
      return () => {
        timer.cancelled = true;
      };
    },
    random: () => random,
  };
  return { dependencies, sleeps, timers };
}

function httpError(statusCode: number, options: { headers?: Record<string, string>; body?: string } = {}) {
  return new APICallError({
    message: `HTTP ${statusCode}`,
    url: 'http://127.0.0.1/v1/chat/completions',
    requestBodyValues: {},
    statusCode,
    responseHeaders: options.headers ?? {},
    responseBody: options.body ?? '{"error":{"message":"fake"}}',
  });
}

/** An attempt function that fails with the given errors in turn, then returns "ok". */
function failing(...errors: unknown[]) {
  let calls = 0;
  const attempt = async () => {
    const error = errors[calls];
    calls += 1;
    if (error !== undefined) throw error;
    return 'ok';
  };
  return { attempt, calls: () => calls };
}

describe('callWithPolicy', () => {
  it('retries a 429 after the Retry-After the provider asked for, then succeeds', async () => {
    const time = fakeTime();
    const { attempt, calls } = failing(httpError(429, { headers: { 'retry-after': '3' } }));
    await expect(callWithPolicy(attempt, { provider: 'p', policy, dependencies: time.dependencies })).resolves.toBe('ok');
    expect(calls()).toBe(2);
    expect(time.sleeps).toEqual([3_000]);
  });

  it('caps a Retry-After longer than maxRetryAfterMs', async () => {
    const time = fakeTime();
    const { attempt } = failing(httpError(429, { headers: { 'retry-after': '3600' } }));
    await callWithPolicy(attempt, { provider: 'p', policy, dependencies: time.dependencies });
    expect(time.sleeps).toEqual([20_000]);
  });

  it('backs off exponentially with jitter, capped, and gives up with ModelUnavailable after maxAttempts', async () => {
    const time = fakeTime(1); // the top of the jitter range: the full exponential delay
    const { attempt, calls } = failing(httpError(500), httpError(502), httpError(503), httpError(500), httpError(500));
    const error = await callWithPolicy(attempt, { provider: 'groq', policy, dependencies: time.dependencies }).catch((e: unknown) => e);
    expect(ModelUnavailableError.isInstance(error)).toBe(true);
    const unavailable = error as ModelUnavailableError;
    expect(unavailable.reason).toBe('ModelUnavailable');
    expect(unavailable.attempts).toBe(4);
    expect(unavailable.lastStatusCode).toBe(500);
    expect(unavailable.message).toContain('groq');
    expect(calls()).toBe(4);
    expect(time.sleeps).toEqual([1_000, 2_000, 3_000]);
  });

  it('fails with ModelAuthFailed at once on 401 and 403, without retrying or naming the key', async () => {
    for (const status of [401, 403]) {
      const time = fakeTime();
      const { attempt, calls } = failing(httpError(status, { body: `{"error":{"message":"bad key ${API_KEY}"}}` }));
      const error = await callWithPolicy(attempt, {
        provider: 'openai',
        policy,
        dependencies: time.dependencies,
        secrets: [API_KEY],
      }).catch((e: unknown) => e);
      expect(ModelAuthFailedError.isInstance(error)).toBe(true);
      expect((error as ModelAuthFailedError).reason).toBe('ModelAuthFailed');
      expect((error as Error).message).toContain('apiKeySecretRef');
      expect((error as Error).message).not.toContain(API_KEY);
      expect(calls()).toBe(1);
      expect(time.sleeps).toEqual([]);
    }
  });

  it('does not retry a rejected request (400) and keeps the key out of the provider detail it quotes', async () => {
    const time = fakeTime();
    const { attempt, calls } = failing(httpError(400, { body: `{"error":{"message":"model nope does not exist; key ${API_KEY}"}}` }));
    const error = await callWithPolicy(attempt, { provider: 'xai', policy, dependencies: time.dependencies, secrets: [API_KEY] }).catch(
      (e: unknown) => e,
    );
    expect(ModelRequestRejectedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('model nope does not exist');
    expect((error as Error).message).not.toContain(API_KEY);
    expect(calls()).toBe(1);
  });

  it('retries network errors (no HTTP status)', async () => {
    const time = fakeTime();
    const network = new APICallError({
      message: 'Cannot connect to API: ECONNREFUSED',
      url: 'x',
      requestBodyValues: {},
      isRetryable: true,
    });
    const { attempt, calls } = failing(network, new TypeError('fetch failed'));
    await expect(callWithPolicy(attempt, { provider: 'p', policy, dependencies: time.dependencies })).resolves.toBe('ok');
    expect(calls()).toBe(3);
  });

  it('times out a hanging attempt even if it ignores its signal, retries, and reports the timeout as the cause', async () => {
    const time = fakeTime();
    const attempts: AbortSignal[] = [];
    const hanging = (signal: AbortSignal) => {
      attempts.push(signal);
      // Fire this attempt's timer once the attempt is running.
      queueMicrotask(() => time.timers.at(-1)?.fire());
      return new Promise<string>(() => undefined);
    };
    const error = await callWithPolicy(hanging, {
      provider: 'p',
      policy: { ...policy, maxAttempts: 2 },
      dependencies: time.dependencies,
    }).catch((e: unknown) => e);
    expect(ModelUnavailableError.isInstance(error)).toBe(true);
    expect(ModelTimeoutError.isInstance((error as Error).cause)).toBe(true);
    expect(attempts).toHaveLength(2);
    expect(attempts.every((signal) => signal.aborted)).toBe(true);
    expect(time.timers.map((timer) => timer.ms)).toEqual([10_000, 10_000]);
  });

  it('cancels the attempt timer when an attempt succeeds', async () => {
    const time = fakeTime();
    await callWithPolicy(async () => 'ok', { provider: 'p', policy, dependencies: time.dependencies });
    expect(time.timers).toHaveLength(1);
    expect(time.timers[0]?.cancelled).toBe(true);
  });

  it("stops at once when the caller aborts, rethrowing the caller's reason", async () => {
    const time = fakeTime();
    const controller = new AbortController();
    const reason = new Error('run deleted');
    let calls = 0;
    const attempt = async () => {
      calls += 1;
      controller.abort(reason);
      throw httpError(503);
    };
    await expect(
      callWithPolicy(attempt, { provider: 'p', policy, dependencies: time.dependencies, abortSignal: controller.signal }),
    ).rejects.toBe(reason);
    expect(calls).toBe(1);
  });

  it('passes an error that is not a provider failure through unchanged', async () => {
    const time = fakeTime();
    const bug = new RangeError('bug');
    const { attempt, calls } = failing(bug);
    await expect(callWithPolicy(attempt, { provider: 'p', policy, dependencies: time.dependencies })).rejects.toBe(bug);
    expect(calls()).toBe(1);
  });

  it('tells onRetry about each retry without the key', async () => {
    const time = fakeTime();
    const events: unknown[] = [];
    const { attempt } = failing(httpError(429, { headers: { 'retry-after-ms': '250' } }));
    await callWithPolicy(attempt, { provider: 'p', policy, dependencies: time.dependencies, onRetry: (event) => events.push(event) });
    expect(events).toEqual([{ attempt: 1, delayMs: 250, problem: 'HTTP 429', statusCode: 429 }]);
  });
});

describe('backoffDelayMs', () => {
  it('stays between half and all of the capped exponential delay', () => {
    expect(backoffDelayMs(policy, 1, 0)).toBe(500);
    expect(backoffDelayMs(policy, 1, 0.999999)).toBe(1_000);
    expect(backoffDelayMs(policy, 2, 0)).toBe(1_000);
    expect(backoffDelayMs(policy, 10, 0.999999)).toBe(3_000);
  });
});

describe('retryAfterMs', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  it('reads retry-after-ms, retry-after seconds and an HTTP date, ignoring garbage', () => {
    expect(retryAfterMs({ 'retry-after-ms': '1500' }, now)).toBe(1_500);
    expect(retryAfterMs({ 'Retry-After': '2' }, now)).toBe(2_000);
    expect(retryAfterMs({ 'retry-after': 'Tue, 01 Jan 2030 00:00:05 GMT' }, now)).toBe(5_000);
    expect(retryAfterMs({ 'retry-after': 'soon' }, now)).toBeUndefined();
    expect(retryAfterMs({ 'retry-after': '-3' }, now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });
});
