// The Redis a local run's queue and state live in: the one named by --redis-url or
// REDIS_URL (checked with a PING, and left as it was found: the run's keys, all under its
// own prefix, are deleted at the end), else a redis-server started for this run alone.
import { Redis } from 'ioredis';
import { RedisUnavailableError } from '../errors/redis-unavailable-error.ts';
import { startRedisServer } from './redis-server-process.ts';
import { redactRedisUrl } from './redis-url.ts';

export interface LocalRedis {
  url: string;
  /** For progress: where the Redis came from. */
  description: string;
  /** Removes what the run left in Redis, or stops the Redis started for it. */
  release(): Promise<void>;
  /** Last resort at process exit: stop a started redis-server synchronously. */
  killNow(): void;
}

function connect(url: string): Redis {
  return new Redis(url, {
    lazyConnect: true,
    connectTimeout: 5_000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
}

async function deleteKeys(url: string, prefix: string): Promise<void> {
  const redis = connect(url);
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } catch {
    // Best effort: the keys are under a prefix of their own and harm nothing.
  } finally {
    redis.disconnect();
  }
}

export async function provideRedis(
  configured: { url: string; origin: string } | undefined,
  prefix: string,
  env: NodeJS.ProcessEnv,
): Promise<LocalRedis> {
  if (configured) {
    const redis = connect(configured.url);
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      await redis.ping();
    } catch (error) {
      throw new RedisUnavailableError(
        `cannot reach Redis at ${redactRedisUrl(configured.url)} (from ${configured.origin}): ${error instanceof Error ? error.message : String(error)}`,
      );
    } finally {
      redis.disconnect();
    }
    return {
      url: configured.url,
      description: `Redis at ${redactRedisUrl(configured.url)} (from ${configured.origin}), keys under ${prefix}:`,
      release: () => deleteKeys(configured.url, prefix),
      killNow: () => undefined,
    };
  }
  const server = await startRedisServer(env);
  return {
    url: server.url,
    description: `redis-server pid ${server.pid} on ${redactRedisUrl(server.url)} (started for this run, with a password of its own; stopped at the end)`,
    release: () => server.stop(),
    killNow: () => server.killNow(),
  };
}
