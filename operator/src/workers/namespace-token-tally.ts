// The tokens each namespace's runs spent per UTC day (issue #15.4), in Redis: one counter per
// namespace and day, added to by the step workers as each model call's usage is recorded, read
// by admission (a namespace past its chamvi.dev/tokens-per-day queues new runs) and by each
// step before it calls the model (a running run stops with BudgetExceeded).
//
// Why Redis: every worker of every replica already writes there on each step, INCRBY is
// atomic across them, and the controller reads it without asking each replica; the tally
// outlives an operator restart like the runs' state does (and, like it, is lost with a Redis
// that keeps nothing: the day then starts again from 0, the documented failure mode). Each
// counter expires two days after its day began, so nothing needs cleaning up.
import type { RedisClient } from './redis-connection.ts';

/** Kept past the day's end so a run that straddles midnight, and a scrape just after it, still read yesterday's figure. */
const TALLY_TTL_SECONDS = 2 * 24 * 60 * 60;

export class NamespaceTokenTally {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  private key(namespace: string, day: string): string {
    return `${this.prefix}:tokens-per-day:${namespace}:${day}`;
  }

  /** Adds tokens to the namespace's day; resolves to the day's new total. */
  async add(namespace: string, day: string, tokens: number): Promise<number> {
    const key = this.key(namespace, day);
    const [[incrError, total] = [], [expireError] = []] =
      (await this.redis
        .multi()
        .incrby(key, Math.max(0, Math.round(tokens)))
        .expire(key, TALLY_TTL_SECONDS)
        .exec()) ?? [];
    if (incrError ?? expireError) throw (incrError ?? expireError) as Error;
    return Number(total);
  }

  /** Tokens the namespace's runs spent on the day (0 when none were counted). */
  async read(namespace: string, day: string): Promise<number> {
    return Number((await this.redis.get(this.key(namespace, day))) ?? 0);
  }
}
