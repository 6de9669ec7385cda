// What the controller's safety net sees of a started run (workers/agent-inspector.ts), on a
// real redis-server with a real BullMQ queue: a run seen moving is not looked at again for
// SIGHTING_MS (agent-sightings.ts), and the first look after that sees a loss. Redis's own
// command counts show whether a look happened.
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { startRedisServer, type RedisServerProcess } from '../../operator/src/cli/local/redis-server-process.ts';
import { agentLoss } from '../../operator/src/reconcile/decide.ts';
import { AgentInspector } from '../../operator/src/workers/agent-inspector.ts';
import { AgentSightings, SIGHTING_MS } from '../../operator/src/workers/agent-sightings.ts';
import { jobId, QUEUE_NAME, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';

let redisServer: RedisServerProcess;
let redis: Redis;
let queue: Queue<AgentJobData, void, AgentJobName>;

beforeAll(async () => {
  redisServer = await startRedisServer(process.env);
  redis = new Redis(redisServer.url, { lazyConnect: false });
  queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: { url: redisServer.url }, prefix: 'inspect' });
});
afterAll(async () => {
  await queue?.close();
  redis?.disconnect();
  await redisServer?.stop();
});

/** Commands Redis has run so far, INFO itself left out. */
async function commandsRun(): Promise<number> {
  const stats = await redis.info('commandstats');
  let total = 0;
  for (const match of stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (match[1] !== 'info') total += Number(match[2]);
  return total;
}

function runningRun(uid: string): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `run-${uid}`, namespace: 'team', uid },
    spec: {} as CodingRun['spec'],
    status: { phase: 'Running', steps: 0 },
  };
}

describe('AgentInspector', () => {
  it('does not look again at a run seen moving within SIGHTING_MS, and sees its loss at the first look after', async () => {
    let now = 1_000_000;
    const states = new RunStateStore(redis, 'inspect', RunStateSeal.generated());
    const inspector = new AgentInspector(queue, states, new AgentSightings(() => now));
    const run = runningRun('uid-lost');
    const ref = { uid: 'uid-lost', namespace: 'team', name: 'run-uid-lost' };
    await states.create(startingState(ref, now));
    await queue.add('step', { ...ref, step: 0 }, { jobId: jobId.step(ref.uid, 0) });

    expect(await inspector.inspect(run)).toMatchObject({ moving: true });

    // Redis loses the run (a restart without persistence).
    await queue.remove(jobId.step(ref.uid, 0));
    await states.delete(ref.uid);
    const before = await commandsRun();
    now += SIGHTING_MS - 1;
    expect(await inspector.inspect(run), 'a moment later, the sighting stands').toMatchObject({ moving: true });
    expect(await commandsRun(), 'no command was sent for it').toBe(before);

    now += 1;
    const seen = await inspector.inspect(run);
    expect(seen).toEqual({ state: 'missing', moving: false });
    expect(agentLoss(seen)?.reason).toBe('StateLost');
    expect(await commandsRun()).toBeGreaterThan(before);
  });

  it('looks every time at a run it did not see moving', async () => {
    const now = 2_000_000;
    const states = new RunStateStore(redis, 'inspect', RunStateSeal.generated());
    const inspector = new AgentInspector(queue, states, new AgentSightings(() => now));
    const run = runningRun('uid-still');

    expect(await inspector.inspect(run)).toEqual({ state: 'missing', moving: false });
    const before = await commandsRun();
    expect(await inspector.inspect(run)).toEqual({ state: 'missing', moving: false });
    expect(await commandsRun(), 'the second inspect looked again').toBeGreaterThan(before);
  });
});
