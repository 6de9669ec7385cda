// A question to Redis that anyone who reaches the health port can make the operator ask
// (/readyz's PING, /metrics' queue counts), so asking must cost nothing while Redis is away.
// The connections retry a command without limit (maxRetriesPerRequest null, as BullMQ needs):
// ioredis keeps each one sent while it is disconnected in its offline queue, and one sent into
// a hung connection in its command queue, until Redis answers, however long ago the caller
// stopped waiting (answer-within.ts cannot cancel it). A loop of probes during a Redis restart
// grew the heap by about 1 KiB a probe until the replica ran out of memory, and the backlog hit
// Redis in one burst when it came back. So a probe sends nothing unless the connection is
// ready, and probes made while one is in flight wait on that one: at most one command each.
import { RedisNotConnectedError } from './errors/redis-not-connected-error.ts';

/** What a probe reads of its connection: ioredis's status ('ready' once it can take commands). */
export interface ProbedConnection {
  readonly status: string;
}

/**
 * `ask`, sent only while `connection` is ready (RedisNotConnectedError otherwise, at once) and
 * shared by every call made before it answers.
 */
export function redisProbe<T>(connection: ProbedConnection, ask: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => {
    if (connection.status !== 'ready') return Promise.reject(new RedisNotConnectedError(connection.status));
    if (inFlight) return inFlight;
    const asked = ask().finally(() => {
      if (inFlight === asked) inFlight = undefined;
    });
    inFlight = asked;
    return asked;
  };
}
