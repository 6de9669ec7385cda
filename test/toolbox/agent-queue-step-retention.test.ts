// How many of a run's step jobs stay in Redis (AgentQueue.step, workers/agent-queue.ts), on a
// real redis-server with a real BullMQ worker handing each step on to the next as the step
// job does: completed jobs are in no namespace's tally, so an active run keeps a constant
// number of them, not one per step; the one a late enqueue must still find is among them.
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentQueue } from '../../operator/src/workers/agent-queue.ts';
import { jobId, QUEUE_NAME, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { RunJobIndex } from '../../operator/src/workers/run-job-index.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const PREFIX = 'retention';
const STEPS = 30;
const server = redisServerForSuite();
let queue: Queue<AgentJobData, void, AgentJobName>;
let agent: AgentQueue;

beforeAll(() => {
  queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: server.redis, prefix: PREFIX });
  const seal = RunStateSeal.generated();
  const sandboxes = new SandboxPool(() => {
    throw new Error('no sandbox is opened here');
  });
  agent = new AgentQueue(
    queue,
    new RunStateStore(server.redis, PREFIX, seal),
    sandboxes,
    seal,
    server.redis,
    new RunJobIndex(server.redis, PREFIX),
  );
});
afterAll(async () => {
  await queue?.close();
});

const refOf = (uid: string) => ({ uid, namespace: 'team', name: `run-${uid}` });

/** The ids of the run's step jobs Redis holds (a job is a hash under its id), in step order. */
async function stepJobsOf(uid: string): Promise<string[]> {
  const keys = await server.redis.keys(`${PREFIX}:${QUEUE_NAME}:${uid}-step-*`);
  const ids = keys.map((key) => key.slice(`${PREFIX}:${QUEUE_NAME}:`.length)).filter((id) => /-step-\d+$/.test(id));
  return ids.sort((a, b) => Number(a.split('-step-')[1]) - Number(b.split('-step-')[1]));
}

/** A worker running `processor` until `done` jobs completed or failed, then closed. */
async function work(processor: (job: Job<AgentJobData>) => Promise<void>, done: number): Promise<string[]> {
  const seen: string[] = [];
  const worker = new Worker<AgentJobData, void, AgentJobName>(QUEUE_NAME, processor, {
    connection: { url: server.url },
    prefix: PREFIX,
  });
  await new Promise<void>((resolve) => {
    const count = (job: Job | undefined) => {
      seen.push(job?.id ?? '');
      if (seen.length === done) resolve();
    };
    worker.on('completed', count);
    worker.on('failed', count);
  });
  await worker.close();
  return seen;
}

describe('AgentQueue.step', () => {
  it(`keeps two of a ${STEPS}-step run's completed step jobs, not one per step; a late enqueue of the step before the last stays a no-op`, async () => {
    const uid = 'uid-long';
    const ref = refOf(uid);
    await agent.step(ref, 0);
    // Each step hands the run on as step-job.ts does: the next step queued by the job that ran.
    const ran = await work(async (job) => {
      const completed = job.data.step!;
      if (completed + 1 < STEPS) await agent.step(ref, completed + 1);
    }, STEPS);
    expect(ran).toHaveLength(STEPS);

    expect(await stepJobsOf(uid)).toEqual([jobId.step(uid, STEPS - 2), jobId.step(uid, STEPS - 1)]);
    expect(await queue.getJobState(jobId.step(uid, STEPS - 2))).toBe('completed');

    // A run parked on an approval by its last step: a stale hand-on queues that step again
    // while the resume runs its calls. Its job is still there, so nothing is added to run.
    await agent.step(ref, STEPS - 2);
    await agent.step(ref, STEPS - 1);
    expect(await queue.getWaitingCount()).toBe(0);
    expect(await stepJobsOf(uid)).toEqual([jobId.step(uid, STEPS - 2), jobId.step(uid, STEPS - 1)]);
  });

  it('drops neither a step job that failed (kept to be looked at) nor one that still waits', async () => {
    const uid = 'uid-failing';
    const ref = refOf(uid);
    await agent.step(ref, 0);
    await work(async () => {
      throw new UnrecoverableError('this step failed for good');
    }, 1);
    expect(await queue.getJobState(jobId.step(uid, 0))).toBe('failed');

    await agent.step(ref, 1);
    await agent.step(ref, 2);
    await agent.step(ref, 3);

    expect(await queue.getJobState(jobId.step(uid, 0)), 'the failed one').toBe('failed');
    expect(await queue.getJobState(jobId.step(uid, 1)), 'a waiting one').toBe('waiting');
    expect(await stepJobsOf(uid)).toHaveLength(4);
  });
});
