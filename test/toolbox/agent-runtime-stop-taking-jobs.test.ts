// What a stopping operator's workers do (agent-runtime.ts stopTakingJobs, the first thing
// shutdown-sequence.ts calls), on a real redis-server and BullMQ: they take no job queued after
// the signal (one a fetch already under way takes goes back untouched), and they answer only
// once the job they hold has ended, so a rollout neither starts steps it will cut nor cuts the
// ones it has. The held job is a prepare whose read of the run waits for the test. With Redis
// gone (helm uninstall deletes the bundled one beside the operator) the stop still ends.
import { afterEach, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { startRedisServer } from '../../operator/src/cli/local/redis-server-process.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { AgentRuntime } from '../../operator/src/workers/agent-runtime.ts';
import { startAgentRuntimeOnRedis } from '../support/agent-runtime-on-redis.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();
let runtime: AgentRuntime | undefined;

afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

const run = (name: string) => ({ metadata: { namespace: 'team', name, uid: `uid-${name}` } }) as ParsedCodingRun;

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

it('takes no job after stopTakingJobs, and answers once the job it holds has ended', async () => {
  // Each job's first read of its run, by name; the held run's read answers when the test says.
  const prefix = `stop-taking-${Date.now()}`;
  const reads: string[] = [];
  let answerHeld!: () => void;
  const held = new Promise<undefined>((resolve) => (answerHeld = () => resolve(undefined)));
  const kube = {
    getRun: async (_namespace: string, name: string) => {
      reads.push(name);
      // Gone: the job ends without doing anything.
      return name === 'held' ? held : undefined;
    },
  } as unknown as KubeGateway;
  runtime = startAgentRuntimeOnRedis(server.url, prefix, kube);
  await runtime.runAgent.start(run('held'), 'pod-held');
  await until(() => reads.includes('held'), 'the worker to take the held job');

  let stopped = false;
  const stopping = runtime.stopTakingJobs().then(() => (stopped = true));
  await runtime.runAgent.start(run('after'), 'pod-after');
  // Long enough for an idle worker of concurrency 2 to take it: it is free and polling.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect(reads).toEqual(['held']);
  expect(stopped, 'stopTakingJobs waits for the job in flight').toBe(false);

  answerHeld();
  await stopping;
  expect(reads, 'the job queued after the signal is left for another replica').toEqual(['held']);
  const depth = await runtime.queueDepth();
  expect(depth).toMatchObject({ active: 0, completed: 1, failed: 0 });
  // Queued again as it was (a prepare is prioritized), or handed back (delayed by nothing) when a
  // fetch already under way took it: either way for the next worker, no attempt spent.
  expect((depth.prioritized ?? 0) + (depth.delayed ?? 0)).toBe(1);
  const [afterJob] = await server.redis.keys(`${prefix}:*uid-after-prepare`);
  expect(Number((await server.redis.hget(afterJob!, 'atm')) ?? 0), 'attempts made').toBe(0);
});

it('stops, and closes, with Redis gone and no job in hand (BullMQ close alone never answers then)', async () => {
  const gone = await startRedisServer(process.env);
  const stopping = startAgentRuntimeOnRedis(gone.url, `redis-gone-${Date.now()}`);
  // The worker polls Redis (its blocking fetch) before Redis goes. The count is asked only once
  // the queue's connection is ready (redis-probe.ts), so it is asked until it answers.
  let depth: Record<string, number> | undefined;
  while (!(depth = await stopping.queueDepth().catch(() => undefined))) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(depth).toMatchObject({ active: 0 });
  await gone.stop();
  // Before worker-stop.ts this waited for an 'end' event ioredis never sends: the test timed out.
  await stopping.stopTakingJobs();
  await stopping.close();
}, 20_000);
