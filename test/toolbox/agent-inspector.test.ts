// What the controller's safety net sees of a started run (workers/agent-inspector.ts), on a
// real redis-server with a real BullMQ queue: a run seen moving is not looked at again for
// SIGHTING_MS (agent-sightings.ts), and the first look after that sees a loss. Redis's own
// command counts show whether a look happened.
import { Queue, Worker, type Job } from 'bullmq';
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
import { commandsByName } from '../support/redis-command-stats.ts';

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
  return [...(await commandsByName(redis)).values()].reduce((sum, calls) => sum + calls, 0);
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

/** A Running run whose fresh state is in Redis, and an inspector whose clock reads `now()`. */
async function stagedRun(uid: string, now: () => number) {
  const states = new RunStateStore(redis, 'inspect', RunStateSeal.generated());
  const inspector = new AgentInspector(queue, states, new AgentSightings(now));
  const ref = { uid, namespace: 'team', name: `run-${uid}` };
  await states.create(startingState(ref, now()));
  return { states, inspector, run: runningRun(uid), ref };
}

describe('AgentInspector', () => {
  it('does not look again at a run seen moving within SIGHTING_MS, and sees its loss at the first look after', async () => {
    let now = 1_000_000;
    const { states, inspector, run, ref } = await stagedRun('uid-lost', () => now);
    await queue.add('step', { ...ref, step: 0 }, { jobId: jobId.step(ref.uid, 0) });

    expect(await inspector.inspect(run)).toMatchObject({ moving: true });

    // Redis loses the run (a restart without persistence).
    await queue.remove(jobId.step(ref.uid, 0));
    await states.delete(ref);
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

  it('sees a run moving from the job its state expects alone: no other job, no active job, no second read', async () => {
    let now = 3_000_000;
    const { inspector, run, ref } = await stagedRun('uid-queued', () => now);
    await queue.add('step', { ...ref, step: 0 }, { jobId: jobId.step(ref.uid, 0) });
    const before = await commandsByName(redis);

    expect(await inspector.inspect(run)).toEqual({ state: 'stepping', moving: true });
    const after = await commandsByName(redis);
    const sent = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    expect(sent('get'), 'the state, read once').toBe(1);
    expect(sent('hgetall'), 'no active job read').toBe(0);
    const queuedLook = [...after].reduce((sum, [name, calls]) => sum + calls - (before.get(name) ?? 0), 0);

    // A full look (no live job: every id, the active jobs, the state twice) sends several times as many.
    await queue.remove(jobId.step(ref.uid, 0));
    now += SIGHTING_MS;
    const beforeFull = await commandsRun();
    expect(await inspector.inspect(run)).toMatchObject({ moving: false });
    const fullLook = (await commandsRun()) - beforeFull;
    expect(queuedLook * 3, `${queuedLook} commands against ${fullLook}`).toBeLessThan(fullLook);
  });

  it('still finds a run moving by an active job whose id the state does not give', async () => {
    const { inspector, run, ref } = await stagedRun('uid-odd', () => 4_000_000);
    // A job under an id the inspector cannot derive, taken by a worker (active), alone in the queue.
    await queue.drain();
    await queue.add('resume', { ...ref }, { jobId: `${ref.uid}-resume-underived` });
    const worker = new Worker(QUEUE_NAME, undefined, { connection: { url: redisServer.url }, prefix: 'inspect' });
    try {
      let active: Job | undefined;
      for (let attempt = 0; attempt < 50 && !active; attempt++) active = await worker.getNextJob('inspector-test');
      expect(active?.id).toBe(`${ref.uid}-resume-underived`);
      expect(await inspector.inspect(run)).toEqual({ state: 'stepping', moving: true });
    } finally {
      await worker.close();
    }
  });

  it('reports why the job its state expects failed for good, when nothing moves the run', async () => {
    const { inspector, run, ref } = await stagedRun('uid-failed', () => 5_000_000);
    await queue.drain();
    await queue.add('step', { ...ref, step: 0 }, { jobId: jobId.step(ref.uid, 0) });
    const worker = new Worker(
      QUEUE_NAME,
      async () => {
        throw new Error('the model endpoint refused the key');
      },
      { connection: { url: redisServer.url }, prefix: 'inspect' },
    );
    try {
      for (let attempt = 0; attempt < 100 && (await queue.getJobState(jobId.step(ref.uid, 0))) !== 'failed'; attempt++)
        await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      await worker.close();
    }
    const seen = await inspector.inspect(run);
    expect(seen).toEqual({ state: 'stepping', moving: false, failedJob: 'the model endpoint refused the key' });
    expect(agentLoss(seen)?.reason).toBe('AgentFailed');
  });

  // A spec.verify run handed back to the model once is finalized by the round-1 job, which
  // saves the second round's verification before it takes the diff; an exec that fails after
  // that leaves the job delayed for its retry, under round 1's id.
  it('sees a run moving by the finalize that saved its verification round and waits to retry', async () => {
    const { states, inspector, run, ref } = await stagedRun('uid-verified', () => 7_000_000);
    const state = (await states.load(ref))!;
    state.stage = 'finalizing';
    state.step = 3;
    state.verification = { passed: true, exitCode: 0, outputTail: '', durationMs: 10, attempts: 2, step: 3 };
    await states.save(state);
    await queue.add('finalize', ref, { jobId: jobId.finalize(ref.uid, 1), delay: 60_000 });
    expect(await inspector.inspect(run)).toEqual({ state: 'finalizing', moving: true });
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
