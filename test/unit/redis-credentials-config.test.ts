// Security #11.1: the operator's start-up check of its Redis connection (workers/redis-connection.ts):
// a Redis without credentials is refused unless the admin sets allowInsecureRedis, the
// password comes from REDIS_PASSWORD when the URL has none, rediss:// connects with TLS.
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { checkRedisCredentials, redisConnection } from '../../operator/src/workers/redis-connection.ts';

const config = (file: object, env: NodeJS.ProcessEnv = {}) => loadOperatorConfig(file, env);

describe('security #11.1 Redis credentials at start-up', () => {
  it('refuses a Redis URL without a password and without REDIS_PASSWORD, naming allowInsecureRedis and REDIS_PASSWORD', () => {
    for (const redisUrl of ['redis://redis.example:6379', 'redis://user@redis.example:6379', 'rediss://redis.example:6380/2']) {
      expect(() => checkRedisCredentials(config({ redisUrl })), redisUrl).toThrow(
        /config key redisUrl: .*no password.*REDIS_PASSWORD.*allowInsecureRedis: true/s,
      );
    }
    // The default (127.0.0.1 without a password) is refused too: loopback is no credential.
    expect(() => checkRedisCredentials(config({}))).toThrow(/allowInsecureRedis/);
  });

  it('accepts a password in the URL, in REDIS_PASSWORD, or an explicit allowInsecureRedis (file or env)', () => {
    expect(() => checkRedisCredentials(config({ redisUrl: 'redis://:s3cret@redis.example:6379' }))).not.toThrow();
    expect(() => checkRedisCredentials(config({ redisUrl: 'redis://default:s3cret@redis.example:6379' }))).not.toThrow();
    expect(() => checkRedisCredentials(config({ redisUrl: 'redis://redis.example:6379' }, { REDIS_PASSWORD: 's3cret' }))).not.toThrow();
    expect(() => checkRedisCredentials(config({ redisUrl: 'redis://redis.example:6379', allowInsecureRedis: true }))).not.toThrow();
    expect(() =>
      checkRedisCredentials(config({ redisUrl: 'redis://redis.example:6379' }, { CHAMVI_ALLOW_INSECURE_REDIS: 'true' })),
    ).not.toThrow();
    expect(config({}).allowInsecureRedis).toBe(false);
  });

  it('puts REDIS_PASSWORD into the connection when the URL has none, and never overrides a URL password', () => {
    expect(
      new URL(redisConnection(config({ redisUrl: 'redis://redis.example:6379/1' }, { REDIS_PASSWORD: 'p@ss:/word' })).url).password,
    ).toBe(encodeURIComponent('p@ss:/word'));
    // A user without a password would make ioredis send an empty one: the password goes in beside it.
    const withUser = new URL(redisConnection(config({ redisUrl: 'redis://app@redis.example:6379' }, { REDIS_PASSWORD: 'pw' })).url);
    expect([withUser.username, withUser.password]).toEqual(['app', 'pw']);
    expect(
      new URL(redisConnection(config({ redisUrl: 'redis://:inurl@redis.example:6379' }, { REDIS_PASSWORD: 'env' })).url).password,
    ).toBe('inurl');
  });

  it('connects rediss:// with TLS: the system CAs by default, or the CA of redisCaFile', () => {
    expect(redisConnection(config({ redisUrl: 'redis://:pw@redis.example:6379' })).options.tls).toBeUndefined();
    expect(redisConnection(config({ redisUrl: 'rediss://:pw@redis.example:6380' })).options.tls).toEqual({});
    const read = (path: string) => Buffer.from(`PEM of ${path}`);
    const withCa = redisConnection(config({ redisUrl: 'rediss://:pw@redis.example:6380' }, { CHAMVI_REDIS_CA_FILE: '/etc/ca.pem' }), read);
    expect(withCa.options.tls).toEqual({ ca: Buffer.from('PEM of /etc/ca.pem') });
  });

  it('says what to fix for a CA file without rediss:// and for an unreadable CA file', () => {
    expect(() => redisConnection(config({ redisUrl: 'redis://:pw@redis.example:6379', redisCaFile: '/etc/ca.pem' }))).toThrow(
      /config key redisCaFile: .*rediss:\/\//,
    );
    expect(() => redisConnection(config({ redisUrl: 'rediss://:pw@redis.example:6380', redisCaFile: '/nonexistent/ca.pem' }))).toThrow(
      /config key redisCaFile: cannot read \/nonexistent\/ca.pem/,
    );
  });

  it('takes stateKey from CHAMVI_STATE_KEY and refuses a short one without echoing it', () => {
    expect(config({}, { CHAMVI_STATE_KEY: 'k'.repeat(40) }).stateKey).toBe('k'.repeat(40));
    expect(config({}).stateKey).toBeUndefined();
    let message = '';
    try {
      config({}, { CHAMVI_STATE_KEY: 'short-secret-value' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/config key stateKey: must be at least 32 characters/);
    expect(message).not.toContain('short-secret-value');
  });
});
