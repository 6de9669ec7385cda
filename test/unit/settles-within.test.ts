// settles-within.ts: a bounded wait that never cancels the work, takes its rejection, and
// answers false once the time is up.
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { settlesWithin } from '../../operator/src/settles-within.ts';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

it('answers true for work that resolves or rejects in time, false for work still pending at the bound', async () => {
  const resolved = settlesWithin(Promise.resolve('done'), 1_000);
  const rejected = settlesWithin(Promise.reject(new Error('failed')), 1_000);
  let finish!: () => void;
  const late = settlesWithin(new Promise<void>((resolve) => (finish = resolve)), 1_000);
  await vi.advanceTimersByTimeAsync(999);
  expect(await resolved).toBe(true);
  expect(await rejected).toBe(true);
  await vi.advanceTimersByTimeAsync(1);
  expect(await late).toBe(false);
  finish();
});
