// Security #11.1: how every replica connects to Redis, and the start-up refusal of a Redis
// without credentials. Redis holds every run's state and queue, so whoever reaches an open
// Redis can stall, stop or (without the state seal) steer runs; a password is the default
// (the chart generates one for its bundled Redis), and an open one needs the admin to say
// so with allowInsecureRedis. rediss:// connects with TLS (the system CAs, or redisCaFile).
import { readFileSync } from 'node:fs';
import type { RedisOptions } from 'ioredis';
import { ConfigError, type OperatorConfig } from '../config/operator-config.ts';

export type RedisSettings = Pick<OperatorConfig, 'redisUrl' | 'redisPassword' | 'redisCaFile' | 'allowInsecureRedis'>;

function parse(url: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new ConfigError('config key redisUrl: not a URL; use redis://[:PASSWORD@]HOST[:PORT][/DB] or rediss://...');
  }
}

/** True when the connection authenticates: a password in the URL or in redisPassword. */
export function redisHasCredentials(settings: RedisSettings): boolean {
  return parse(settings.redisUrl).password !== '' || settings.redisPassword !== undefined;
}

/** Throws ConfigError, naming the key to set, for a Redis without credentials that the admin did not allow. */
export function checkRedisCredentials(settings: RedisSettings): void {
  if (redisHasCredentials(settings) || settings.allowInsecureRedis) return;
  throw new ConfigError(
    'config key redisUrl: the Redis URL has no password and redisPassword (env REDIS_PASSWORD) is not set. ' +
      'Give Redis a password (requirepass) and set REDIS_PASSWORD from a Secret, or put it in the URL ' +
      '(redis://:PASSWORD@host:6379, from a Secret); to run with an open Redis anyway, set allowInsecureRedis: true ' +
      '(env CHAMVI_ALLOW_INSECURE_REDIS=true), knowing that anyone who reaches it can stop or stall every run.',
  );
}

/** The URL and ioredis options of a connection: the password added when the URL has none, TLS for rediss://. */
export function redisConnection(
  settings: RedisSettings,
  readFile: (path: string) => Buffer = readFileSync,
): { url: string; options: RedisOptions } {
  const url = parse(settings.redisUrl);
  // ioredis takes the URL's credentials over the options' (a URL with a user and no
  // password would even send an empty one), so the password goes into the URL.
  if (url.password === '' && settings.redisPassword !== undefined) url.password = encodeURIComponent(settings.redisPassword);
  const options: RedisOptions = {};
  if (url.protocol === 'rediss:') {
    options.tls = settings.redisCaFile ? { ca: readCa(settings.redisCaFile, readFile) } : {};
  } else if (settings.redisCaFile) {
    throw new ConfigError(
      'config key redisCaFile: set, but redisUrl is not rediss://; use a rediss:// URL to connect with TLS, or remove redisCaFile',
    );
  }
  return { url: url.toString(), options };
}

function readCa(path: string, readFile: (path: string) => Buffer): Buffer {
  try {
    return readFile(path);
  } catch (error) {
    throw new ConfigError(`config key redisCaFile: cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
