// A resume whose run ended while the approved call ran (approval.tools [bash]; the model asked
// for `bash ./deploy.sh`, write_file and edit_file; the deploy takes minutes, and a cancel's
// ending or a deletion ends the run meanwhile, its stop deleting the state in Redis). The
// resume job saved the state back with a plain save, ran write_file and edit_file against the
// sandbox the ending was deleting, and queued a step. The same for a publish approval answered
// as the run ended: the state came back and the publish job was queued. A real redis-server;
// the model a stand-in; the sandbox a recorder of every call made to it, whose bash call is
// where the stop comes, as it would during a long deploy.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { approvalInputJson, approvalInputSha256 } from '../../operator/src/reconcile/approval-answer.ts';
import type { ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import { PUBLISH_APPROVAL_ID } from '../../operator/src/workers/publish-wait.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runEndedHarness, stopDeletesState } from '../support/run-ended-harness.ts';

const server = redisServerForSuite();

const answer = [
  { toolName: 'bash', input: { command: './deploy.sh' } },
  { toolName: 'write_file', input: { path: 'a', content: 'a' } },
  { toolName: 'edit_file', input: { path: 'b', oldString: 'x', newString: 'y' } },
];
const changesWorkspace = (request: ToolRequest) => request.tool === 'write_file' || request.tool === 'edit_file';

/** A run (bash gated) on a replica holding no copy of it, its sandbox recording every call; `duringBash` is done as bash runs. */
async function harness(spec: Partial<CodingRun['spec']> = {}) {
  const hooks = { duringBash: async () => {} };
  const h = await runEndedHarness(server.redis, {
    prefix: 'ended-during-approved-call',
    model: 'asks-to-deploy',
    spec: { task: 'Deploy.', approval: { tools: ['bash'] }, ...spec },
    answer: async () => answer,
    duringSandboxCall: async (request) => {
      if (request.tool === 'bash') await hooks.duringBash();
    },
    onReplicaHoldingNoCopy: true,
  });
  return { ...h, hooks };
}

/** The step that parks on the bash call, then the approve of what it parked on. */
async function parkedThenApproved(h: Awaited<ReturnType<typeof harness>>) {
  expect(await h.job('step', { step: 0 })).toBe('done');
  const pending = h.gateway.current()!.status!.pendingApproval!;
  expect(pending.toolName).toBe('bash');
  expect(h.sandboxCalls).toEqual([]);
  return h.job('resume', { approval: { id: pending.id, decision: 'approve', sha256: pending.inputSha256, user: 'alice' } });
}

describe('a run ended while its approved call ran', () => {
  it('runs none of the calls after it, does not bring the state back, and queues no step', async () => {
    const h = await harness();
    h.hooks.duringBash = () => stopDeletesState(h);
    expect(await parkedThenApproved(h)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.tool)).toContain('bash');
    expect(h.sandboxCalls.filter(changesWorkspace)).toEqual([]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(h.enqueued).toEqual([]);
  });

  it('still records the answer and the call it ran: the Approved Event, and the transcript entry with its result', async () => {
    const h = await harness();
    h.hooks.duringBash = () => stopDeletesState(h);
    expect(await parkedThenApproved(h)).toBe('done');
    expect(h.events.filter((event) => event.reason === 'Approved').map((event) => event.message)).toEqual([
      expect.stringMatching(/^bash call \S+ approved by alice/),
    ]);
    const answered = h.transcript.filter((entry) => entry.kind === 'approval');
    expect(answered).toHaveLength(1);
    expect(answered[0]!.approval).toMatchObject({ decision: 'approve' });
    // The deploy that ran, with its result; the calls after it did not run and carry none.
    expect(answered[0]!.calls!.map((call) => [call.tool, call.result !== undefined])).toEqual([
      ['bash', true],
      ['write_file', false],
      ['edit_file', false],
    ]);
    // Recorded, never written back: no state, no tally entry, nothing queued.
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it('runs the calls after it while the state is there', async () => {
    const h = await harness();
    expect(await parkedThenApproved(h)).toBe('done');
    expect(h.sandboxCalls.filter(changesWorkspace).map((request) => request.tool)).toEqual(['write_file', 'edit_file']);
    expect(await h.states.loadText(h.ref.uid)).toBeDefined();
    expect(h.enqueued).toEqual(['step 1']);
  });
});

describe('a run ended as its publish approval was approved', () => {
  /** A run waiting on its publish approval, as finalize parked it. */
  async function waitingToPublish() {
    const h = await harness();
    const state = (await h.states.load(h.ref))!;
    const input = { branch: 'chamvi/run', diffSha256: 'f'.repeat(64) };
    state.stage = 'waiting';
    state.publish = { diffSha256: input.diffSha256 };
    state.pendingApproval = {
      id: PUBLISH_APPROVAL_ID,
      toolCallId: PUBLISH_APPROVAL_ID,
      toolName: PUBLISH_APPROVAL_ID,
      input,
      requestedAt: new Date().toISOString(),
      results: [],
      remaining: [],
    };
    await h.states.save(state);
    const approve = () =>
      h.job('resume', {
        approval: { id: PUBLISH_APPROVAL_ID, decision: 'approve', sha256: approvalInputSha256(approvalInputJson(input)), user: 'alice' },
      });
    return { ...h, approve };
  }

  it('is not handed to the publish job, and its state is not brought back', async () => {
    const h = await waitingToPublish();
    // The cancel's ending comes right after the approve's status write, and its stop deletes the state.
    const write = h.deps.status.write.bind(h.deps.status);
    h.deps.status = Object.assign(Object.create(h.deps.status) as typeof h.deps.status, {
      write: async (...args: Parameters<typeof write>) => {
        const outcome = await write(...args);
        await h.states.delete(h.ref);
        return outcome;
      },
    });
    expect(await h.approve()).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(h.enqueued).toEqual([]);
  });

  it('is handed to the publish job while the state is there', async () => {
    const h = await waitingToPublish();
    expect(await h.approve()).toBe('done');
    expect((await h.states.load(h.ref))!.stage).toBe('publishing');
    expect(h.enqueued).toEqual(['publish']);
  });
});
