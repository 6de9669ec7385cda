// A throwaway redis-server for one local run: Debian's redis-server from PATH, on a free
// loopback port, with no persistence, in a temporary directory, stopped when the run ends.
// It stays in the plugin's process group, so a Ctrl-C in the terminal reaches it too.
// Security #11.1: it has a fresh password (requirepass), given on stdin as its config
// (`redis-server -`), so the password is in no argv that `ps` shows; the URL carries it.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RedisUnavailableError } from '../errors/redis-unavailable-error.ts';
import { freePort } from './free-port.ts';

export interface RedisServerProcess {
  readonly url: string;
  readonly pid: number;
  /** SIGTERM, then SIGKILL after a grace; removes the directory. */
  stop(): Promise<void>;
  /** For process exit: SIGKILL now, synchronously. */
  killNow(): void;
}

const READY_TIMEOUT_MS = 15_000;
const PORT_ATTEMPTS = 3;

/** The redis-server executable on PATH, if any. */
export function findRedisServer(env: NodeJS.ProcessEnv): string | undefined {
  for (const directory of (env.PATH ?? '').split(path.delimiter)) {
    if (!directory) continue;
    const candidate = path.join(directory, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** Resolves once redis-server says it accepts connections; rejects with its last output if it exits first. */
function ready(child: ChildProcess, output: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => finish(new Error(`redis-server did not become ready within ${READY_TIMEOUT_MS / 1000}s: ${output()}`)),
      READY_TIMEOUT_MS,
    );
    const onData = () => {
      if (output().includes('Ready to accept connections')) finish();
    };
    const onExit = (code: number | null, signal: string | null) =>
      finish(new Error(`redis-server exited (${signal ?? `code ${code}`}): ${output()}`));
    const finish = (error?: Error) => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve();
    };
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', (error) => finish(error));
  });
}

/** The config redis-server reads from stdin: loopback only, no persistence, a password. */
export function redisServerConfig(port: number, directory: string, password: string): string {
  // Quoted: redis.conf takes a double-quoted string with backslash escapes.
  const quote = (value: string) => `"${value.replace(/[\\"]/g, '\\$&')}"`;
  return [
    `port ${port}`,
    'bind 127.0.0.1',
    'protected-mode yes',
    'save ""',
    'appendonly no',
    `dir ${quote(directory)}`,
    'daemonize no',
    'logfile ""',
    `requirepass ${quote(password)}`,
    '',
  ].join('\n');
}

async function startOnce(command: string, directory: string): Promise<RedisServerProcess> {
  const port = await freePort();
  const password = randomBytes(24).toString('hex');
  const child = spawn(command, ['-'], {
    cwd: directory,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin!.on('error', () => undefined);
  child.stdin!.end(redisServerConfig(port, directory, password));
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-2000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await ready(child, () => tail.trim().split('\n').slice(-3).join(' | '));
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    url: `redis://:${password}@127.0.0.1:${port}`,
    pid: child.pid!,
    async stop() {
      if (alive()) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => alive() && child.kill('SIGKILL'), 3_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(directory, { recursive: true, force: true });
    },
    killNow() {
      if (alive()) child.kill('SIGKILL');
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

export async function startRedisServer(env: NodeJS.ProcessEnv): Promise<RedisServerProcess> {
  const command = findRedisServer(env);
  if (!command) {
    throw new RedisUnavailableError(
      'run --local needs Redis: install redis-server (Debian/Ubuntu: apt-get install redis-server) so it is on PATH, or point REDIS_URL or --redis-url at a Redis',
    );
  }
  const directory = mkdtempSync(path.join(tmpdir(), 'chamvi-local-redis-'));
  let last: unknown;
  // Another program may take the free port before redis-server binds it: try a new one.
  for (let attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
    try {
      return await startOnce(command, directory);
    } catch (error) {
      last = error;
    }
  }
  rmSync(directory, { recursive: true, force: true });
  throw new RedisUnavailableError(
    `could not start ${command}: ${last instanceof Error ? last.message : String(last)}; set REDIS_URL or --redis-url to use a running Redis instead`,
  );
}
