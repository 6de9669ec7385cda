// The Redis URL of run --local (--redis-url or REDIS_URL) holds a password: a message about it,
// a bad one or one that cannot be reached, names it without the password or not at all.
import { describe, expect, it } from 'vitest';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';
import { configuredRedis, redactRedisUrl, redisUrlProblem } from '../../operator/src/cli/local/redis-url.ts';

const PASSWORD = 'hunter2';

const messageOf = (act: () => unknown): string => {
  try {
    act();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('no error');
};

describe('a local run’s Redis URL', () => {
  it('refuses a REDIS_URL with a trailing newline (from a secret file) without printing it', () => {
    const env = { REDIS_URL: `redis://:${PASSWORD}@redis.internal:6379\n` };
    const message = messageOf(() => configuredRedis({}, env));
    expect(message).toMatch(/^REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL; this one holds whitespace or a control character/);
    expect(message).not.toContain(PASSWORD);
    expect(configuredRedis({}, { REDIS_URL: `redis://:${PASSWORD}@redis.internal:6379` })).toEqual({
      url: `redis://:${PASSWORD}@redis.internal:6379`,
      origin: 'REDIS_URL',
    });
  });

  it('refuses a bad --redis-url without printing it', () => {
    for (const url of [
      `redis://:${PASSWORD}@h:6379\n`,
      `redis://:${PASSWORD} @h`,
      `https://:${PASSWORD}@h`,
      `redis://u:12/${PASSWORD}@h`,
    ]) {
      const message = messageOf(() => parseArguments(['run', '-f', 'run.yaml', '--local', '--redis-url', url]));
      expect(message).toMatch(/^--redis-url must be a redis:\/\/ or rediss:\/\/ URL; this one /);
      expect(message).not.toContain(PASSWORD);
    }
  });

  it('shows a URL without a password that holds / or @, or is given in the query', () => {
    expect(redactRedisUrl('redis://user:p@ss@redis.internal:6379/0')).toBe('redis://user:***@redis.internal:6379/0');
    expect(redactRedisUrl(`redis://:${PASSWORD}@127.0.0.1:6379`)).toBe('redis://:***@127.0.0.1:6379');
    expect(redactRedisUrl(`rediss://h:6380/2?password=${PASSWORD}&family=6`)).toBe('rediss://h:6380/2?password=***&family=***');
    for (const url of [`redis://:pa/${PASSWORD}@h:6379`, `redis://u:12/${PASSWORD}@h`, `redis://:${PASSWORD}@h\n`, PASSWORD]) {
      expect(redisUrlProblem(url)).toBeDefined();
      expect(redactRedisUrl(url)).not.toContain(PASSWORD);
      expect(redactRedisUrl(url)).not.toMatch(/pa\/|12/);
    }
  });

  it('takes the URLs ioredis takes', () => {
    for (const url of ['redis://127.0.0.1:6379', 'rediss://:p%2Fw@redis.internal:6380/3', 'redis://[::1]:6379/', 'redis://user:pw@h'])
      expect(redisUrlProblem(url)).toBeUndefined();
  });
});
