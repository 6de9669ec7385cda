// Whether an approval's answer is queued already (AgentQueue.answerQueued, workers/agent-queue.ts),
// on a real redis-server with a real BullMQ queue: the resume job resume() queued is found by its
// deterministic id, and only for that run, that approval and that decision (an approve's digest).
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun, ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { ApprovalAnswer } from '../../operator/src/reconcile/run-agent.ts';
import { AgentQueue } from '../../operator/src/workers/agent-queue.ts';
import { QUEUE_NAME, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { RunJobIndex } from '../../operator/src/workers/run-job-index.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const PREFIX = 'answer-queued';
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

function run(uid: string): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `run-${uid}`, namespace: 'team', uid },
    spec: {} as ParsedCodingRun['spec'],
    status: { phase: 'Running' },
  } as CodingRun;
}

const approve: ApprovalAnswer = { id: 'call-7', decision: 'approve', sha256: 'a'.repeat(64), user: 'alice' };

describe('AgentQueue.answerQueued', () => {
  it('finds the resume job resume() queued for that answer only, and nothing once the run is stopped', async () => {
    const parked = run('uid-parked');
    // Control: nothing is queued before the answer is.
    expect(await agent.answerQueued(parked, approve)).toBe(false);

    await agent.resume(parked, approve);

    expect(await agent.answerQueued(parked, approve), 'the answer resume() queued').toBe(true);
    // The same answer as another leader reads it again (a copy, not the object queued).
    expect(await agent.answerQueued(parked, { ...approve, user: undefined, reason: 'ok' })).toBe(true);
    // Another digest (its first 16 hex digits, which the id names), another decision, another approval.
    expect(await agent.answerQueued(parked, { ...approve, sha256: 'b'.repeat(64) }), 'another digest').toBe(false);
    expect(await agent.answerQueued(parked, { id: 'call-7', decision: 'deny' }), 'a deny').toBe(false);
    expect(await agent.answerQueued(parked, { ...approve, id: 'call-8' }), 'another approval').toBe(false);
    // Another run's same answer.
    expect(await agent.answerQueued(run('uid-other'), approve), "another run's").toBe(false);

    // Once the run's jobs are removed, the answer is no longer there.
    expect(await agent.stop(parked)).toBe(0);
    expect(await agent.answerQueued(parked, approve), 'after stop').toBe(false);
  });

  it('finds a queued deny by its approval id, whatever digest it is read with', async () => {
    const parked = run('uid-denied');
    await agent.resume(parked, { id: 'call-3', decision: 'deny', reason: 'no' });

    expect(await agent.answerQueued(parked, { id: 'call-3', decision: 'deny', timedOut: true })).toBe(true);
    expect(await agent.answerQueued(parked, { id: 'call-3', decision: 'approve', sha256: 'c'.repeat(64) })).toBe(false);
  });
});
