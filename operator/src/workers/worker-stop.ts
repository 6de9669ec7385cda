// A replica's workers stopping (agent-runtime.ts stopTakingJobs, the first thing
// shutdown-sequence.ts calls). BullMQ's Worker.close first disconnects its blocking Redis
// connection and waits for that connection's 'end' event, which an ioredis client already
// reconnecting never emits. With Redis gone (`helm uninstall` deletes the bundled Redis beside
// the operator; a Redis outage during a rollout) close() never resolved, and the stop held the
// pod until the end of its grace period. Once no job is in this worker's hands and Redis is
// unreachable, nothing is left to wait for: a job a fetch took and did not start is still
// locked in Redis and handed out again when the lock expires, as after a crash.
//
// How long "unreachable" must last before it counts as gone depends on the Redis: a failover
// behind Sentinel leaves the master unreachable for the Sentinels' down-after-milliseconds and
// the election, far longer than a blip of one server. redisUnreachableStopMs decides it from
// the config, and the stop is told the result.
import type { OperatorConfig } from '../config/operator-config.ts';
import { shutdownTimings } from '../shutdown-sequence.ts';
import type { RedisTopology } from './redis-connection.ts';

/** The jobs this worker is running (agent-worker.ts counts them around each job it runs). */
export class JobsInHand {
  private count = 0;

  /** Runs `work` counted as one job in hand until it settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    this.count += 1;
    try {
      return await work();
    } finally {
      this.count -= 1;
    }
  }

  get size(): number {
    return this.count;
  }
}

export interface WorkerStopParts {
  /** BullMQ's close without force: takes no more jobs, waits for those held (the normal path). */
  close(): Promise<unknown>;
  jobs: Pick<JobsInHand, 'size'>;
  /** Whether the worker's Redis answers now (the ioredis client's status is 'ready'). */
  redisReady(): boolean;
}

/** How often a stop looks again at the jobs in hand and at Redis while close() has not answered. */
export const WORKER_STOP_POLL_MS = 200;

/**
 * How long Redis must stay unreachable before a stop takes it as gone, by the shape of Redis,
 * when config redisFailoverSeconds does not say. A fetch already blocked in Redis when a stop
 * ends during a failover takes a job once Redis is back and leaves it locked and unstarted
 * until its lock expires, counted as a stall; close() would have handed it back untouched.
 */
export const DEFAULT_REDIS_FAILOVER_MS: Readonly<Record<RedisTopology['mode'], number>> = {
  // A restart of the one server or a network blip is not Redis gone; `helm uninstall`
  // deleting the bundled Redis beside the operator is, and the pod should not wait long on it.
  standalone: 2_000,
  // ioredis's Cluster client stays ready while one master fails over (the other nodes answer);
  // it is unready only when every node is gone.
  cluster: 2_000,
  // The Sentinels call the master down after down-after-milliseconds (30 s in Redis's own
  // sentinel.conf), then elect a leader and promote a replica; ioredis finds it on its next retry.
  sentinel: 40_000,
};

/**
 * The longest a stop may wait on an unreachable Redis with the shutdown's `shutdownTimeoutSeconds`:
 * it must end a look before the shutdown gives up on the jobs (shutdown-sequence.ts jobsMs), so
 * the shutdown then closes the rest instead of logging jobs still running that are not. In whole
 * seconds, as redisFailoverSeconds counts: a longer wanted wait is then never cut to a shorter
 * one, and a cut wait ends a second or more before jobsMs, which the drift of its many looks
 * needs (jobsMs less 1 s from a shutdown of 6 s up). A shutdown under 3 s allows less than a
 * second: whole looks, at least one.
 */
export function longestRedisUnreachableStopMs(shutdownTimeoutSeconds: number): number {
  const latestMs = shutdownTimings(shutdownTimeoutSeconds * 1000).jobsMs - WORKER_STOP_POLL_MS;
  const wholeSeconds = Math.floor(latestMs / 1000) * 1000;
  if (wholeSeconds >= 1000) return wholeSeconds;
  return Math.max(WORKER_STOP_POLL_MS, Math.floor(latestMs / WORKER_STOP_POLL_MS) * WORKER_STOP_POLL_MS);
}

export interface RedisUnreachableStop {
  /** How long the stop waits on an unreachable Redis with no job in hand. */
  waitMs: number;
  /** What redisFailoverSeconds, or the mode's default, asks for: more than waitMs when the shutdown is too short for it. */
  wantedMs: number;
}

/**
 * How long a stop waits on an unreachable Redis with no job in hand: redisFailoverSeconds, or
 * the mode's default, whole whenever it ends before the shutdown gives up on the jobs; cut to
 * what does (longestRedisUnreachableStopMs) only when it would not, since the shutdown gives up
 * on the stop then anyway.
 */
export function redisUnreachableStop(
  mode: RedisTopology['mode'],
  config: Pick<OperatorConfig, 'redisFailoverSeconds' | 'shutdownTimeoutSeconds'>,
): RedisUnreachableStop {
  const wantedMs = config.redisFailoverSeconds === undefined ? DEFAULT_REDIS_FAILOVER_MS[mode] : config.redisFailoverSeconds * 1000;
  return { waitMs: Math.min(wantedMs, longestRedisUnreachableStopMs(config.shutdownTimeoutSeconds)), wantedMs };
}

/** redisUnreachableStop's wait alone: what the stop is told. */
export function redisUnreachableStopMs(
  mode: RedisTopology['mode'],
  config: Pick<OperatorConfig, 'redisFailoverSeconds' | 'shutdownTimeoutSeconds'>,
): number {
  return redisUnreachableStop(mode, config).waitMs;
}

/** The shortest shutdownTimeoutSeconds whose stop waits `wantedMs` whole (the chart sets it to terminationGracePeriodSeconds less 5). */
export function shutdownSecondsForRedisWait(wantedMs: number): number {
  let seconds = 1;
  while (longestRedisUnreachableStopMs(seconds) < wantedMs) seconds += 1;
  return seconds;
}

/**
 * Said at start-up when the shutdown cuts the wait: otherwise nothing shows that a failover
 * longer than the cut wait (with the chart's default grace, 21 s behind Sentinels whose
 * down-after-milliseconds alone is 30 s) ends a stop early, leaving a fetched job locked.
 */
export function cutRedisWaitWarning(
  stop: RedisUnreachableStop,
  config: Pick<OperatorConfig, 'redisFailoverSeconds' | 'shutdownTimeoutSeconds'>,
): { fields: Record<string, number>; message: string } | undefined {
  if (stop.waitMs >= stop.wantedMs) return undefined;
  const neededSeconds = shutdownSecondsForRedisWait(stop.wantedMs);
  const seconds = (ms: number) => `${ms / 1000} s`;
  return {
    fields: {
      waitSeconds: stop.waitMs / 1000,
      wantedSeconds: stop.wantedMs / 1000,
      shutdownTimeoutSeconds: config.shutdownTimeoutSeconds,
      neededShutdownTimeoutSeconds: neededSeconds,
    },
    message:
      `a stopping replica takes an unreachable Redis for gone after ${seconds(stop.waitMs)}, not the ${seconds(stop.wantedMs)} a failover may take ` +
      `(${config.redisFailoverSeconds === undefined ? 'the default for this Redis' : 'redisFailoverSeconds'}): shutdownTimeoutSeconds ` +
      `${config.shutdownTimeoutSeconds} ends the stop before that. A replica stopping during a longer failover exits anyway, and a job ` +
      `it was fetching stays locked, unstarted, until its lock expires (jobLockSeconds). To wait the whole time set shutdownTimeoutSeconds ` +
      `to ${neededSeconds} (the chart: terminationGracePeriodSeconds ${neededSeconds + 5}), or, if your failovers are shorter, redisFailoverSeconds to their time`,
  };
}

export interface WorkerStopTiming {
  /** How long Redis must be unreachable, with no job in hand, before the stop ends without close() (redisUnreachableStopMs). */
  unreachableMs: number;
  /** How often the stop looks. */
  pollMs?: number;
}

/**
 * Resolves when `close()` has, or once no job has been in hand while Redis was unreachable at
 * every look for `unreachableMs`, whichever comes first. A rejection of close() resolves it
 * too: the worker takes no more jobs either way.
 */
export function stopWorker(parts: WorkerStopParts, { unreachableMs, pollMs = WORKER_STOP_POLL_MS }: WorkerStopTiming): Promise<void> {
  const looksNeeded = Math.max(1, Math.ceil(unreachableMs / pollMs));
  return new Promise<void>((resolve) => {
    const done = () => {
      clearInterval(poll);
      resolve();
    };
    let unreachable = 0;
    const poll = setInterval(() => {
      unreachable = parts.jobs.size === 0 && !parts.redisReady() ? unreachable + 1 : 0;
      if (unreachable >= looksNeeded) done();
    }, pollMs);
    poll.unref();
    parts.close().then(done, done);
  });
}
