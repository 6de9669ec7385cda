// Security #11.1: the test Redis servers have a password, as the chart's Redis does, so every
// test that runs the operator exercises the authenticated path. The password goes into a
// config file readable by this user only (redis-server reads it as its first argument), never
// into argv, where `ps` would show it.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface RedisAuth {
  password: string;
  /** The config file holding `requirepass`; pass it as redis-server's first argument. */
  configFile: string;
}

/** Writes `<dir>/redis-auth.conf` with a fresh password (or the given one, for a restart). */
export function writeRedisAuth(dir: string, password = randomBytes(16).toString('hex')): RedisAuth {
  const configFile = join(dir, 'redis-auth.conf');
  writeFileSync(configFile, `requirepass "${password}"\nprotected-mode yes\n`, { mode: 0o600 });
  return { password, configFile };
}

/** redis://:PASSWORD@127.0.0.1:PORT */
export function redisUrlWithPassword(port: number, password: string): string {
  return `redis://:${encodeURIComponent(password)}@127.0.0.1:${port}`;
}
