// The ids of the jobs each run has queued, kept beside the queue: one Redis set per run,
// written with every job, so that stopping a run (agent-queue.ts) finds all of its jobs, a
// finished run's steps and resumes among them, by reading one key.
//
// Why: a job's id starts with its run's uid, and stop() used to find them by walking every key
// in Redis (SCAN MATCH <uid>-*). That cost grew with everything Redis holds (each run's jobs are
// kept an hour after they complete), and it was paid two or three times by every finished run:
// 50 ms p50 per stop at N=30, O(keys) round trips per stop at N=1000 (docs/benchmarks.md).
import type { RedisClient } from './redis-connection.ts';

/**
 * Longer than any job the set lists is kept: a failed job's record stays a day after it fails
 * (agent-queue.ts, removeOnFail). Refreshed with every job; a set is deleted sooner, by the stop
 * that finds none of the run's jobs running, so this only bounds one left by a lost operator.
 */
export const RUN_JOB_INDEX_TTL_SECONDS = 2 * 24 * 60 * 60;

export class RunJobIndex {
  constructor(
    private readonly redis: RedisClient,
    /** The queue's prefix: in a Redis Cluster its hash tag puts the set beside the run's other keys. */
    private readonly prefix: string,
  ) {}

  private key(uid: string): string {
    return `${this.prefix}:run-jobs:${uid}`;
  }

  /** Lists a job of the run: sent beside its enqueue, on the same connection. */
  async note(uid: string, jobId: string): Promise<void> {
    const key = this.key(uid);
    const replies = (await this.redis.multi().sadd(key, jobId).expire(key, RUN_JOB_INDEX_TTL_SECONDS).exec()) ?? [];
    const failed = replies.find(([error]) => error);
    if (failed) throw failed[0] as Error;
  }

  /** Every job id listed for the run (none when the set is gone or never was). */
  list(uid: string): Promise<string[]> {
    return this.redis.smembers(this.key(uid));
  }

  async forget(uid: string): Promise<void> {
    await this.redis.del(this.key(uid));
  }
}
