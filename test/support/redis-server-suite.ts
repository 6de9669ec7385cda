// One real redis-server for a test file: started before its tests and stopped after them, with
// a connection to it. Call at the top level of the file.
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { startRedisServer, type RedisServerProcess } from '../../operator/src/cli/local/redis-server-process.ts';

export interface RedisSuite {
  /** The connection, from the file's first test on. */
  readonly redis: Redis;
  readonly url: string;
}

export function redisServerForSuite(): RedisSuite {
  let server: RedisServerProcess | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    server = await startRedisServer(process.env);
    redis = new Redis(server.url, { lazyConnect: false });
  }, 30_000);
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('redis-server is not started yet: use it inside a test or a hook');
    return value;
  };
  return {
    get redis() {
      return started(redis);
    },
    get url() {
      return started(server).url;
    },
  };
}
