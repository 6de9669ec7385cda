// Breaking parts of the local control plane on purpose, for the faults tier: stop and start
// kube-apiserver with the argv it was started with, and run a private redis-server (with
// or without AOF) that a test may crash and restart. Both stay recorded in the control
// plane's state dir, so its teardown stops them even when a test fails half-way.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inject } from 'vitest';
import { redisServerPath } from './control-plane/binaries.ts';
import { freePorts } from './control-plane/free-port.ts';
import {
  logTail,
  recordedProcesses,
  startManagedProcess,
  stopProcessGroup,
  type RecordedProcess,
} from './control-plane/managed-process.ts';
import { redisPing } from './control-plane/readiness.ts';
import { redisUrlWithPassword, writeRedisAuth, type RedisAuth } from './control-plane/redis-auth.ts';
import { kubectl } from './cluster.ts';

function stateDir(): string {
  return inject('controlPlaneStateDir');
}

function recorded(name: string): RecordedProcess {
  const entry = recordedProcesses(stateDir()).find((process) => process.name === name);
  if (!entry) throw new Error(`no ${name} recorded in ${stateDir()}`);
  return entry;
}

/** argv of a live process, from /proc (the pid file holds only the command). */
function argvOf(pid: number): string[] {
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  if (argv.at(-1) === '') argv.pop();
  return argv;
}

export interface ApiServerOutage {
  /** When the old process had exited (the API was unreachable from then on). */
  stoppedAt: number;
  /** When the new process answered /readyz. */
  readyAt: number;
}

/**
 * Stops kube-apiserver (SIGTERM to its process group, SIGKILL after a grace), keeps it down
 * for `downMs`, starts it again with the same argv and waits until it is ready, and until
 * kube-controller-manager works again (its watches back off while the API is gone, and the
 * next test's namespace would wait for its default ServiceAccount).
 */
export async function restartApiServer(downMs: number): Promise<ApiServerOutage> {
  const entry = recorded('kube-apiserver');
  const [command, ...args] = argvOf(entry.pid);
  if (command !== entry.command) throw new Error(`kube-apiserver pid ${entry.pid} runs ${command}, not ${entry.command}`);
  await stopProcessGroup(entry.pid, entry.command, 10_000);
  const stoppedAt = Date.now();
  await sleep(downMs);
  const started = startManagedProcess({ name: 'kube-apiserver', stateDir: stateDir(), command: entry.command, args });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const ready = await kubectl(['get', '--raw', '/readyz'], { timeoutMs: 5_000 }).catch(() => undefined);
    if (ready?.code === 0 && ready.stdout.trim() === 'ok') break;
    if (started.exited()) throw new Error(`kube-apiserver exited on restart: ${logTail(started.logPath)}`);
    if (Date.now() > deadline) throw new Error(`kube-apiserver not ready 120 s after its restart: ${logTail(started.logPath)}`);
    await sleep(250);
  }
  const readyAt = Date.now();
  await waitForControllerManager(deadline);
  return { stoppedAt, readyAt };
}

async function waitForControllerManager(deadline: number): Promise<void> {
  const probe = `faults-probe-${Date.now()}`;
  const created = await kubectl(['create', 'namespace', probe]);
  if (created.code !== 0) throw new Error(`could not create namespace ${probe}: ${created.stderr}`);
  try {
    while ((await kubectl(['get', 'serviceaccount', 'default', '-n', probe, '-o', 'name'])).code !== 0) {
      if (Date.now() > deadline)
        throw new Error('kube-controller-manager made no default ServiceAccount within 120 s of the API server restart');
      await sleep(500);
    }
  } finally {
    await kubectl(['delete', 'namespace', probe, '--wait=false']);
  }
}

export interface PrivateRedisOptions {
  /** appendonly yes, appendfsync always: nothing acknowledged is lost in a crash. */
  aof: boolean;
}

/** A redis-server of the test's own, on a free loopback port, with a password (kept across restarts). */
export class PrivateRedis {
  private constructor(
    readonly name: string,
    readonly port: number,
    private readonly dir: string,
    private readonly options: PrivateRedisOptions,
    private pid: number,
    private readonly auth: RedisAuth,
  ) {}

  get url(): string {
    return redisUrlWithPassword(this.port, this.auth.password);
  }

  static async start(options: PrivateRedisOptions): Promise<PrivateRedis> {
    const [port] = await freePorts(1);
    const name = `redis-faults-${port}`;
    const dir = join(stateDir(), name);
    mkdirSync(dir, { recursive: true });
    const redis = new PrivateRedis(name, port!, dir, options, 0, writeRedisAuth(dir));
    await redis.launch();
    return redis;
  }

  private async launch(): Promise<void> {
    const persistence = this.options.aof ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
    const child = startManagedProcess({
      name: this.name,
      stateDir: stateDir(),
      command: redisServerPath(),
      args: [
        this.auth.configFile,
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        ...persistence,
        '--dir',
        this.dir,
        '--daemonize',
        'no',
      ],
    });
    this.pid = child.pid;
    const deadline = Date.now() + 30_000;
    while (!(await redisPing(this.port, this.auth.password))) {
      if (child.exited()) throw new Error(`${this.name} exited: ${logTail(child.logPath)}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not answer PING within 30 s`);
      await sleep(100);
    }
  }

  /** A crash (SIGKILL), `downMs` without Redis, and a start on the same port and dir. */
  async crashAndRestart(downMs: number): Promise<{ stoppedAt: number; readyAt: number }> {
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
    while (await redisPing(this.port, this.auth.password)) await sleep(50);
    const stoppedAt = Date.now();
    await sleep(downMs);
    await this.launch();
    return { stoppedAt, readyAt: Date.now() };
  }

  /** SIGSTOP: Redis stalls, every command waits (nothing is lost) until thaw(). */
  freeze(): void {
    process.kill(-this.pid, 'SIGSTOP');
  }

  thaw(): void {
    process.kill(-this.pid, 'SIGCONT');
  }

  async stop(): Promise<void> {
    this.thaw();
    await stopProcessGroup(this.pid, redisServerPath(), 5_000);
  }
}
