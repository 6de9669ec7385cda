// A replica's workers stopping (worker-stop.ts): the stop ends when BullMQ's close does, or,
// with Redis unreachable, once no job is in hand (close never answers then); a job in hand is
// always waited for, and with Redis up the stop is close()'s alone. How long Redis must be
// unreachable is decided from the Redis's shape and the config (redisUnreachableStopMs).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadOperatorConfig, type OperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { RedisTopology } from '../../operator/src/workers/redis-connection.ts';
import {
  JobsInHand,
  redisUnreachableStopMs,
  stopWorker,
  WORKER_STOP_POLL_MS,
  type WorkerStopParts,
} from '../../operator/src/workers/worker-stop.ts';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/** A stop's promise and whether it has resolved yet. */
function watched(promise: Promise<void>): { ended: () => boolean } {
  let ended = false;
  void promise.then(() => (ended = true));
  return { ended: () => ended };
}

const never = () => new Promise<never>(() => undefined);

/** One server's wait, 2 s: WORKER_STOP_UNREACHABLE_LOOKS looks. */
const STANDALONE_WAIT_MS = 2_000;
const WORKER_STOP_UNREACHABLE_LOOKS = STANDALONE_WAIT_MS / WORKER_STOP_POLL_MS;
const standaloneStop = (parts: WorkerStopParts) => stopWorker(parts, { unreachableMs: STANDALONE_WAIT_MS });

describe('stopWorker', () => {
  it('ends when close() does, with Redis up', async () => {
    let closed!: () => void;
    const stop = watched(
      standaloneStop({ close: () => new Promise<void>((r) => (closed = r)), jobs: { size: 0 }, redisReady: () => true }),
    );
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS * 50);
    expect(stop.ended(), 'with Redis up the stop is close()’s').toBe(false);
    closed();
    await vi.advanceTimersByTimeAsync(0);
    expect(stop.ended()).toBe(true);
  });

  it('ends without close() once no job is in hand and Redis is unreachable', async () => {
    const jobs = { size: 1 };
    let ready = true;
    const stop = watched(standaloneStop({ close: never, jobs, redisReady: () => ready }));
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
      standaloneStop({
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
      standaloneStop({ close: () => Promise.reject(new Error('connection is closed')), jobs: { size: 0 }, redisReady: () => true }),
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(stop.ended()).toBe(true);
  });
  it('waits the unreachable time it is told: a 30 s Sentinel failover does not end a 40 s wait, Redis gone for 40 s does', async () => {
    let ready = false;
    const stop = watched(stopWorker({ close: never, jobs: { size: 0 }, redisReady: () => ready }, { unreachableMs: 40_000 }));
    await vi.advanceTimersByTimeAsync(30_000);
    expect(stop.ended(), 'Redis unreachable through a failover shorter than the wait').toBe(false);
    ready = true;
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS);
    ready = false;
    await vi.advanceTimersByTimeAsync(40_000 - WORKER_STOP_POLL_MS);
    expect(stop.ended(), 'the count starts again after Redis answered').toBe(false);
    await vi.advanceTimersByTimeAsync(WORKER_STOP_POLL_MS);
    expect(stop.ended()).toBe(true);
  });
});

describe('redisUnreachableStopMs', () => {
  type Case = [
    what: string,
    mode: RedisTopology['mode'],
    config: Pick<OperatorConfig, 'redisFailoverSeconds' | 'shutdownTimeoutSeconds'>,
    waitMs: number,
  ];
  // shutdownTimeoutSeconds 25 (the chart's default grace, 30, less 5) gives the jobs 22 s.
  const cases: Case[] = [
    ['one server: a blip, 2 s', 'standalone', { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 25 }, 2_000],
    [
      'a Cluster: its client is unready only with every node gone, 2 s',
      'cluster',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 25 },
      2_000,
    ],
    [
      'Sentinel: down-after-milliseconds and the election, 40 s',
      'sentinel',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 85 },
      40_000,
    ],
    [
      'Sentinel under the default grace: 1 s before the shutdown gives up on the jobs',
      'sentinel',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 25 },
      21_000,
    ],
    ['Sentinel, the admin’s failover time', 'sentinel', { redisFailoverSeconds: 65, shutdownTimeoutSeconds: 85 }, 65_000],
    [
      'the admin’s failover time, past the shutdown’s: bounded by it',
      'sentinel',
      { redisFailoverSeconds: 65, shutdownTimeoutSeconds: 60 },
      56_000,
    ],
    [
      'one server failing over behind one address (a managed Redis)',
      'standalone',
      { redisFailoverSeconds: 15, shutdownTimeoutSeconds: 25 },
      15_000,
    ],
    [
      'a shutdown too short for the default: what it allows',
      'standalone',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 4 },
      1_000,
    ],
    ['a shutdown of 1 s: still one look', 'sentinel', { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 1 }, WORKER_STOP_POLL_MS],
  ];

  it.each(cases)('%s', (_what, mode, config, waitMs) => {
    expect(redisUnreachableStopMs(mode, config)).toBe(waitMs);
  });

  it('takes redisFailoverSeconds from CHAMVI_REDIS_FAILOVER_SECONDS or the file, unset unless given, and refuses 0', () => {
    expect(loadOperatorConfig({}, {}).redisFailoverSeconds).toBeUndefined();
    expect(loadOperatorConfig({ redisFailoverSeconds: 50 }, { CHAMVI_REDIS_FAILOVER_SECONDS: '70' }).redisFailoverSeconds).toBe(70);
    expect(() => loadOperatorConfig({}, { CHAMVI_REDIS_FAILOVER_SECONDS: '0' })).toThrow(/config key redisFailoverSeconds/);
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
