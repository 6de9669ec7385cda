// A replica's workers stopping (worker-stop.ts): the stop ends when BullMQ's close does, or,
// with Redis unreachable, once no job is in hand (close never answers then); a job in hand is
// always waited for, and with Redis up the stop is close()'s alone. How long Redis must be
// unreachable is decided from the Redis's shape and the config (redisUnreachableStopMs).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadOperatorConfig, type OperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { RedisTopology } from '../../operator/src/workers/redis-connection.ts';
import { shutdownTimings } from '../../operator/src/shutdown-sequence.ts';
import {
  cutRedisWaitWarning,
  JobsInHand,
  redisUnreachableStop,
  redisUnreachableStopMs,
  shutdownSecondsForRedisWait,
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
    // shutdownTimeoutSeconds 5 (the chart's least grace, 10, less 5) gives the jobs 2.5 s.
    [
      'a shutdown whose jobs’ time the default ends before: the default, whole',
      'standalone',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 5 },
      2_000,
    ],
    [
      'a longer wait there: the whole seconds that end before, no fewer than a shorter wait gets',
      'sentinel',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 5 },
      2_000,
    ],
    [
      'a shutdown too short for the default: what it allows',
      'standalone',
      { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 4 },
      1_000,
    ],
    // 1 s for the jobs: four looks, the last one look before the shutdown gives up on the stop.
    ['a shutdown of 2 s: the looks it allows, not one', 'sentinel', { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 2 }, 800],
    ['a shutdown of 1 s: still one look', 'sentinel', { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 1 }, WORKER_STOP_POLL_MS],
  ];

  it.each(cases)('%s', (_what, mode, config, waitMs) => {
    expect(redisUnreachableStopMs(mode, config)).toBe(waitMs);
  });

  // Every shutdownTimeoutSeconds a pod may have, every failover time up to two minutes.
  const shutdowns = Array.from({ length: 120 }, (_, index) => index + 1);
  const failovers = Array.from({ length: 120 }, (_, index) => index + 1);

  it('waits the whole failover time whenever the stop then ends a look before the shutdown gives up on the jobs', () => {
    for (const shutdownTimeoutSeconds of shutdowns) {
      const { jobsMs } = shutdownTimings(shutdownTimeoutSeconds * 1000);
      for (const redisFailoverSeconds of failovers) {
        const waitMs = redisUnreachableStopMs('sentinel', { redisFailoverSeconds, shutdownTimeoutSeconds });
        if (redisFailoverSeconds * 1000 + WORKER_STOP_POLL_MS <= jobsMs) expect(waitMs).toBe(redisFailoverSeconds * 1000);
        else expect(waitMs).toBeLessThan(redisFailoverSeconds * 1000);
      }
    }
  });

  it('ends every cut wait a look before the shutdown gives up on the jobs, and never cuts a longer wait below a shorter one', () => {
    for (const shutdownTimeoutSeconds of shutdowns) {
      const { jobsMs } = shutdownTimings(shutdownTimeoutSeconds * 1000);
      let before = 0;
      for (const redisFailoverSeconds of failovers) {
        const waitMs = redisUnreachableStopMs('sentinel', { redisFailoverSeconds, shutdownTimeoutSeconds });
        // stopWorker ends at its last look: whole looks.
        const endsAtMs = Math.max(1, Math.ceil(waitMs / WORKER_STOP_POLL_MS)) * WORKER_STOP_POLL_MS;
        expect(
          endsAtMs,
          `shutdownTimeoutSeconds ${shutdownTimeoutSeconds}, redisFailoverSeconds ${redisFailoverSeconds}`,
        ).toBeLessThanOrEqual(Math.max(WORKER_STOP_POLL_MS, jobsMs - WORKER_STOP_POLL_MS));
        expect(waitMs).toBeGreaterThanOrEqual(before);
        before = waitMs;
      }
    }
  });

  // What docs/operations.md, values.yaml and the config's description say.
  it('cuts a wait to shutdownTimeoutSeconds less 4 s from a shutdown of 6 s up: terminationGracePeriodSeconds less 9 s with the chart', () => {
    for (const shutdownTimeoutSeconds of shutdowns.filter((seconds) => seconds >= 6)) {
      expect(redisUnreachableStopMs('sentinel', { redisFailoverSeconds: 3600, shutdownTimeoutSeconds })).toBe(
        (shutdownTimeoutSeconds - 4) * 1000,
      );
    }
  });

  it('names the least shutdownTimeoutSeconds that waits the whole time; the chart warns below the grace that gives it', () => {
    for (const redisFailoverSeconds of failovers) {
      const needed = shutdownSecondsForRedisWait(redisFailoverSeconds * 1000);
      expect(redisUnreachableStopMs('sentinel', { redisFailoverSeconds, shutdownTimeoutSeconds: needed })).toBe(
        redisFailoverSeconds * 1000,
      );
      expect(redisUnreachableStopMs('sentinel', { redisFailoverSeconds, shutdownTimeoutSeconds: needed - 1 })).toBeLessThan(
        redisFailoverSeconds * 1000,
      );
      // templates/NOTES.txt: terminationGracePeriodSeconds (at least 10) below failover + 9 s.
      if (redisFailoverSeconds >= 3) expect(needed + 5).toBe(redisFailoverSeconds + 9);
      else expect(needed + 5).toBeLessThanOrEqual(10);
    }
  });

  it('warns at start-up when the shutdown cuts the wait, naming the wait used and the grace the whole wait needs', () => {
    const config = { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 25 };
    const warning = cutRedisWaitWarning(redisUnreachableStop('sentinel', config), config);
    expect(warning?.fields).toEqual({ waitSeconds: 21, wantedSeconds: 40, shutdownTimeoutSeconds: 25, neededShutdownTimeoutSeconds: 44 });
    expect(warning?.message).toContain('after 21 s, not the 40 s a failover may take');
    expect(warning?.message).toContain('set shutdownTimeoutSeconds to 44 (the chart: terminationGracePeriodSeconds 49)');
  });

  it('says nothing when the whole wait fits: one server under the default grace, Sentinels under a grace of 49', () => {
    const standalone = { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 25 };
    expect(cutRedisWaitWarning(redisUnreachableStop('standalone', standalone), standalone)).toBeUndefined();
    const sentinel = { redisFailoverSeconds: undefined, shutdownTimeoutSeconds: 44 };
    expect(cutRedisWaitWarning(redisUnreachableStop('sentinel', sentinel), sentinel)).toBeUndefined();
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
