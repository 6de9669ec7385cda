// /readyz and /metrics ask Redis on every request, and anyone who reaches port 8080 can send
// those (agent-runtime.ts checkRedis and queueDepth). ioredis keeps a command it cannot send yet
// (maxRetriesPerRequest null, as BullMQ needs) until Redis is back, whoever stopped waiting for
// it: a loop of probes during a Redis restart grew the heap without bound (200 000 PINGs were
// 220 MiB, more than the chart's heap) and the backlog hit Redis in one burst when it returned.
// On a real redis-server: stopped, nothing is queued; hung (stopped with its connection open),
// waiting checks share one command; up, the checks answer as before.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import { findRedisServer, redisServerConfig, startRedisServer } from '../../operator/src/cli/local/redis-server-process.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import type { AgentRuntime } from '../../operator/src/workers/agent-runtime.ts';
import { startAgentRuntimeOnRedis } from '../support/agent-runtime-on-redis.ts';
import { commandsByName } from '../support/redis-command-stats.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function runtimeOn(redisUrl: string): AgentRuntime {
  const runtime = startAgentRuntimeOnRedis(redisUrl, `redis-down-${Date.now()}`);
  cleanups.push(() => runtime.close());
  return runtime;
}

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A redis-server on the port and password of `url`, as a restarted Redis comes back at its Service's address. */
async function redisServerAt(url: string): Promise<{ stop(): Promise<void> }> {
  const { port, password } = new URL(url);
  const directory = mkdtempSync(path.join(tmpdir(), 'chamvi-redis-down-'));
  const child = spawn(findRedisServer(process.env)!, ['-'], { cwd: directory, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end(redisServerConfig(Number(port), directory, decodeURIComponent(password)));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('Ready to accept connections')) resolve();
    });
    child.once('exit', () => reject(new Error(`redis-server exited: ${output.slice(-500)}`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    async stop() {
      child.kill('SIGKILL');
      await exited;
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

it('queues no command while Redis is down, however many checks and scrapes come, and answers again once it is back', async () => {
  const first = await startRedisServer(process.env);
  cleanups.push(() => first.stop());
  const runtime = runtimeOn(first.url);
  const metrics = new OperatorMetrics({ defaultMetrics: false, queueDepth: () => runtime.queueDepth(), queueDepthTimeoutMs: 200 });
  await until(async () => ((await runtime.checkRedis()) === undefined ? true : undefined), 'Redis to be ready');
  await first.stop();
  // A check made before ioredis has seen the socket close still finds it ready and sends its
  // PING; that one waits out its second and ioredis sends it again once Redis is back (its
  // autoResendUnfulfilledCommands). Counted here, so the PINGs expected below are exact.
  const seenGone = await until(() => runtime.checkRedis(), 'the check to see Redis gone');
  const sentBeforeTheClose = /no answer from Redis within/.test(seenGone) ? 1 : 0;

  const checks = await Promise.all(Array.from({ length: 10_000 }, () => runtime.checkRedis()));
  expect(checks.every((problem) => typeof problem === 'string' && /redis/.test(problem))).toBe(true);
  const scrapes = await Promise.all(Array.from({ length: 1_000 }, () => metrics.registry.metrics()));
  expect(scrapes.every((body) => !/chamvi_queue_jobs\{/.test(body))).toBe(true);

  // Back at the same address: what ioredis kept for it arrives now.
  const second = await redisServerAt(first.url);
  cleanups.push(() => second.stop());
  await until(async () => ((await runtime.checkRedis()) === undefined ? true : undefined), 'Redis to be back');
  expect(await until(() => runtime.queueDepth().catch(() => undefined), 'the queue to be counted')).toMatchObject({ active: 0 });
  const observer = new Redis(first.url);
  cleanups.push(() => observer.disconnect());
  // Long enough for a queued backlog to be sent and run.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const calls = await commandsByName(observer);
  expect(calls.get('ping') ?? 0, 'PINGs: the one check that found Redis back, and one sent as it went').toBe(1 + sentBeforeTheClose);
  // The worker's own scripts on reconnect are a handful; a counting script per scrape was a thousand.
  expect(calls.get('evalsha') ?? 0, 'scripts run').toBeLessThan(100);
}, 60_000);

it('sends one PING for all the checks waiting on a hung Redis (connected, not answering)', async () => {
  const server = await startRedisServer(process.env);
  cleanups.push(() => server.stop());
  cleanups.push(() => process.kill(server.pid, 'SIGCONT'));
  const runtime = runtimeOn(server.url);
  const observer = new Redis(server.url);
  cleanups.push(() => observer.disconnect());
  await until(async () => ((await runtime.checkRedis()) === undefined ? true : undefined), 'Redis to be ready');
  const before = (await commandsByName(observer)).get('ping') ?? 0;

  process.kill(server.pid, 'SIGSTOP');
  const checks = await Promise.all(Array.from({ length: 10_000 }, () => runtime.checkRedis()));
  expect(new Set(checks)).toEqual(new Set(['redis unreachable: PING: no answer from Redis within 1000 ms']));
  process.kill(server.pid, 'SIGCONT');

  expect(await runtime.checkRedis(), 'ready again once Redis answers').toBeUndefined();
  const after = (await commandsByName(observer)).get('ping') ?? 0;
  // The shared PING sent while it hung, which the next check waited on, and nothing else.
  expect(after - before).toBe(1);
}, 60_000);
