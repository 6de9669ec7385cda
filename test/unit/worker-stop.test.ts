// A replica's workers stopping (worker-stop.ts): the stop ends when BullMQ's close does, or,
// with Redis unreachable, once no job is in hand (close never answers then); a job in hand is
// always waited for, and with Redis up the stop is close()'s alone.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { JobsInHand, stopWorker, WORKER_STOP_POLL_MS, WORKER_STOP_UNREACHABLE_LOOKS } from '../../operator/src/workers/worker-stop.ts';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/** A stop's promise and whether it has resolved yet. */
function watched(promise: Promise<void>): { ended: () => boolean } {
  let ended = false;
  void promise.then(() => (ended = true));
  return { ended: () => ended };
}

const never = () => new Promise<never>(() => undefined);

describe('stopWorker', () => {
  it('ends when close() does, with Redis up', async () => {
    let closed!: () => void;
    const stop = watched(stopWorker({ close: () => new Promise<void>((r) => (closed = r)), jobs: { size: 0 }, redisReady: () => true }));
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS * 50);
    expect(stop.ended(), 'with Redis up the stop is close()’s').toBe(false);
    closed();
    await vi.advanceTimersByTimeAsync(0);
    expect(stop.ended()).toBe(true);
  });

  it('ends without close() once no job is in hand and Redis is unreachable', async () => {
    const jobs = { size: 1 };
    let ready = true;
    const stop = watched(stopWorker({ close: never, jobs, redisReady: () => ready }));
    ready = false;
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS * 50);
    expect(stop.ended(), 'a job in hand is waited for, Redis or not').toBe(false);
    jobs.size = 0;
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS * (WORKER_STOP_UNREACHABLE_LOOKS - 1));
    expect(stop.ended(), 'Redis unreachable for fewer looks than it takes').toBe(false);
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS);
    expect(stop.ended()).toBe(true);
  });

  it('does not end on a blip: Redis unreachable for a look or two, then back', async () => {
    let ready = true;
    let looks = 0;
    const stop = watched(
      stopWorker({
        close: never,
        jobs: { size: 0 },
        redisReady: () => {
          looks += 1;
          return ready;
        },
      }),
    );
    for (let blip = 0; blip < 20; blip += 1) {
      ready = false;
      await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS * (WORKER_STOP_UNREACHABLE_LOOKS - 1));
      ready = true;
      await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS);
    }
    expect(looks).toBeGreaterThan(WORKER_STOP_UNREACHABLE_LOOKS * 20 - 1);
    expect(stop.ended(), 'a failover is not Redis gone').toBe(false);
  });

  it('ends when close() rejects: the worker takes no more jobs either way', async () => {
    const stop = watched(
      stopWorker({ close: () => Promise.reject(new Error('connection is closed')), jobs: { size: 0 }, redisReady: () => true }),
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(stop.ended()).toBe(true);
  });
});

describe('JobsInHand', () => {
  it('counts a job until it settles, resolved or rejected', async () => {
    const jobs = new JobsInHand();
    let finish!: () => void;
    let fail!: (error: Error) => void;
    const one = jobs.run(() => new Promise<void>((r) => (finish = r)));
    const two = jobs.run(() => new Promise<void>((_, reject) => (fail = reject)));
    expect(jobs.size).toBe(2);
    finish();
    await one;
    expect(jobs.size).toBe(1);
    fail(new Error('step failed'));
    await expect(two).rejects.toThrow('step failed');
    expect(jobs.size).toBe(0);
  });
});
