// The ids of the jobs each run has queued whose ids stop() cannot derive, kept beside the queue:
// one Redis set per run, written with each job but its steps (a step's id is its number, and
// the run's state or status gives the count). Stopping a run (agent-queue.ts) reads it to find
// its resumes (named after their approvals) and finalize rounds.
//
// Why: a job's id starts with its run's uid, and stop() used to find the ids it cannot derive by
// walking every key in Redis (SCAN MATCH <uid>-*). That cost grew with everything Redis holds
// (each run's jobs are kept an hour after they complete) and was paid two or three times by
// every finished run: two stops took 62-70 ms p50 with 50 000 other keys in Redis, 2 ms now
// (docs/benchmarks.md).
import type { RedisClient } from './redis-connection.ts';

/**
 * Longer than any job the set lists is kept: a failed job's record stays a day after it fails
 * (agent-queue.ts, removeOnFail). Refreshed with every job listed; a stop takes the jobs it
 * removed off the set and deletes it once none of the run's jobs runs, so this only bounds a
 * set left by an operator that lost track of the run.
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

  /** Takes jobs that are gone off the run's list, so a later stop does not look for them again. */
  async drop(uid: string, jobIds: readonly string[]): Promise<void> {
    if (jobIds.length > 0) await this.redis.srem(this.key(uid), ...jobIds);
  }

  async forget(uid: string): Promise<void> {
    await this.redis.del(this.key(uid));
  }
}
