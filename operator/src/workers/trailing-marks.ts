// Which trailing step records landed (trailing-record.ts), kept in Redis for the other
// replicas. The process that sent a record's two writes marks it once both have landed. The
// next job may run on another replica: it reads the mark and does not send them again. The
// mark is sealed like the state, because Redis is not trusted (security #11.1): a forged mark
// would keep a record lost in a crash from being sent again.
import type { RunStateSeal } from './run-state-seal.ts';
import type { RedisClient } from './redis-connection.ts';

export interface LandedMarks {
  mark(uid: string, step: number): Promise<void>;
  landed(uid: string, step: number): Promise<boolean>;
}

/** As long as a next job may come: a later one finds no mark and sends the record again, harmlessly. */
const MARK_TTL_SECONDS = 600;

/** The run's mark: removed with its state (run-state.ts), so a deleted run leaves no key. */
export const landedMarkKey = (prefix: string, uid: string) => `${prefix}:landed:${uid}`;

export function redisLandedMarks(redis: RedisClient, prefix: string, seal: RunStateSeal): LandedMarks {
  const key = (uid: string) => landedMarkKey(prefix, uid);
  const fact = (uid: string, step: number) => JSON.stringify({ landed: uid, step });
  return {
    async mark(uid, step) {
      await redis.set(key(uid), seal.seal(fact(uid, step)), 'EX', MARK_TTL_SECONDS);
    },
    async landed(uid, step) {
      const text = await redis.get(key(uid));
      if (text === null) return false;
      const opened = seal.open(text);
      return 'json' in opened && opened.json === fact(uid, step);
    },
  };
}
