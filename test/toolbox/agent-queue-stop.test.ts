// Stopping a run (AgentQueue.stop, workers/agent-queue.ts) on a real redis-server with a real
// BullMQ queue: every job the run ever queued is found, its steps by their number and the rest
// through its list (workers/run-job-index.ts), whatever else Redis holds, and nothing of the run
// is left once none of its jobs runs. Redis's own command counts show that no key is walked.
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun, ParsedCodingRun } from '../../operator/src/api/index.ts';
import { startRedisServer, type RedisServerProcess } from '../../operator/src/cli/local/redis-server-process.ts';
import { AgentQueue } from '../../operator/src/workers/agent-queue.ts';
import { jobId, QUEUE_NAME, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { RunJobIndex } from '../../operator/src/workers/run-job-index.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { commandsByName } from '../support/redis-command-stats.ts';

const PREFIX = 'stopping';
let redisServer: RedisServerProcess;
let redis: Redis;
let queue: Queue<AgentJobData, void, AgentJobName>;
let agent: AgentQueue;

beforeAll(async () => {
  redisServer = await startRedisServer(process.env);
  redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: redis, prefix: PREFIX });
  const seal = RunStateSeal.generated();
  const sandboxes = new SandboxPool(() => {
    throw new Error('no sandbox is opened by stop()');
  });
  agent = new AgentQueue(queue, new RunStateStore(redis, PREFIX, seal), sandboxes, seal, redis, new RunJobIndex(redis, PREFIX));
});
afterAll(async () => {
  await queue?.close();
  redis?.disconnect();
  await redisServer?.stop();
});

/** A run that finished after `steps` steps (its terminal status says so; its state is gone). */
function run(uid: string, steps = 6): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `run-${uid}`, namespace: 'team', uid },
    spec: {} as ParsedCodingRun['spec'],
    status: { phase: 'Succeeded', steps },
  } as ParsedCodingRun;
}

/** Every key of the run, by its uid (the e2e deletion test's check, test/e2e/run-deletion.test.ts). */
async function keysOf(uid: string): Promise<string[]> {
  return (await redis.keys(`${PREFIX}:*`)).filter((key) => key.includes(uid));
}

/** Queues what a run that took six steps and an approval had: its state is gone, as a finished run's is. */
async function queueFinishedRun(uid: string): Promise<string[]> {
  const ref = { uid, namespace: 'team', name: `run-${uid}` };
  await agent.start(run(uid), `run-${uid}-sandbox`);
  for (let step = 0; step < 6; step++) await agent.step(ref, step);
  await agent.resume(run(uid) as CodingRun, { id: 'call-7', decision: 'approve', sha256: 'a'.repeat(64) });
  await agent.finalize(ref);
  return [
    jobId.prepare(uid),
    ...[0, 1, 2, 3, 4, 5].map((step) => jobId.step(uid, step)),
    jobId.resume(uid, 'call-7', { sha256: 'a'.repeat(64) }),
    jobId.finalize(uid),
  ];
}

describe('AgentQueue.stop', () => {
  it("removes every job the run queued, its steps and a resume whose ids no state gives any more, none of another run's, without walking Redis's keys", async () => {
    const queued = await queueFinishedRun('uid-finished');
    const other = await queueFinishedRun('uid-other');
    // What a busy Redis holds besides: the stop must not cost more for it.
    const filler = redis.pipeline();
    for (let index = 0; index < 5000; index++) filler.set(`${PREFIX}:unrelated:${index}`, '1');
    await filler.exec();
    // Control: the jobs are there, the far steps and the resume among them.
    for (const id of queued) expect(await queue.getJobState(id), id).not.toBe('unknown');
    expect(await keysOf('uid-finished')).not.toEqual([]);
    // Steps are numbered from the run's count, not listed: their hand-over writes nothing more.
    expect((await new RunJobIndex(redis, PREFIX).list('uid-finished')).sort()).toEqual(
      [
        jobId.prepare('uid-finished'),
        jobId.resume('uid-finished', 'call-7', { sha256: 'a'.repeat(64) }),
        jobId.finalize('uid-finished'),
      ].sort(),
    );

    const before = await commandsByName(redis);
    expect(await agent.stop(run('uid-finished'))).toBe(0);
    const after = await commandsByName(redis);
    const sent = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);

    for (const id of queued) expect(await queue.getJobState(id), id).toBe('unknown');
    expect(await keysOf('uid-finished'), 'nothing of the run is left, its index neither').toEqual([]);
    for (const id of other) expect(await queue.getJobState(id), `${id} (another run's)`).not.toBe('unknown');
    // What a stop costs no longer grows with what Redis holds (a SCAN walked every key, twice or
    // three times per finished run): it reads one set.
    expect(sent('scan') + sent('keys'), "no walk of Redis's keys").toBe(0);

    // A later stop of the same run (its pod's deletion, the run's) finds nothing and removes nothing.
    expect(await agent.stop(run('uid-finished'))).toBe(0);
    expect(await keysOf('uid-finished')).toEqual([]);
    for (const id of other) expect(await queue.getJobState(id), `${id} (another run's)`).not.toBe('unknown');
  });

  it("stops nothing of another run's that a tampered index names", async () => {
    const other = await queueFinishedRun('uid-bystander');
    await agent.start(run('uid-target'), 'run-uid-target-sandbox');
    // Redis is not trusted (security #11.1): someone who can write to it lists the bystander's jobs as the target's.
    for (const id of other) await redis.sadd(`${PREFIX}:run-jobs:uid-target`, id);

    expect(await agent.stop(run('uid-target'))).toBe(0);
    expect(await queue.getJobState(jobId.prepare('uid-target'))).toBe('unknown');
    for (const id of other) expect(await queue.getJobState(id), id).not.toBe('unknown');
  });

  it('counts a job that is running, and removes the rest and what it queued once it has ended', async () => {
    await queue.drain(true);
    const queued = await queueFinishedRun('uid-busy');
    const index = new RunJobIndex(redis, PREFIX);
    const listed = await index.list('uid-busy');
    const worker = new Worker(QUEUE_NAME, undefined, { connection: { url: redisServer.url }, prefix: PREFIX });
    try {
      // A worker holds one of the run's jobs (its lock: it cannot be removed while it runs).
      let active: Job | undefined;
      for (let attempt = 0; attempt < 50 && !active; attempt++) active = await worker.getNextJob('stop-test');
      expect(queued).toContain(active?.id);

      expect(await agent.stop(run('uid-busy')), 'the running job').toBe(1);
      expect(await queue.getJobState(active!.id!)).toBe('active');
      for (const id of queued.filter((id) => id !== active!.id)) expect(await queue.getJobState(id), id).toBe('unknown');
      expect(await index.list('uid-busy'), 'the jobs removed are off the list: the next stop does not look for them').toEqual(
        listed.filter((id) => id === active!.id),
      );

      // The job ends, and queues another finalize round as it does (the deletion's requeue finds it).
      await active!.moveToCompleted(undefined, 'stop-test', false);
      await agent.finalize({ uid: 'uid-busy', namespace: 'team', name: 'run-uid-busy' }, 2);

      expect(await agent.stop(run('uid-busy'))).toBe(0);
      expect(await queue.getJobState(jobId.finalize('uid-busy', 2))).toBe('unknown');
      expect(await keysOf('uid-busy')).toEqual([]);
    } finally {
      await worker.close();
    }
  });
});
