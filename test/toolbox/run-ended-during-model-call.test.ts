// A step whose run ended while the model answered (the controller's ending of a cancel, a
// deletion): the stop that ended it deleted the run's state in Redis and could not remove the
// running job. On a replica that is not the leader, past a model call of more than ~2 s, the job
// holds no copy of the run (kube/recent-runs.ts readHeld) to see the end in, and the answer's
// tool calls ran against the sandbox the ending was deleting (a save before a write_file brought
// the state back). The state's absence in Redis is what the job looks at now. A real
// redis-server; the model a stand-in that deletes the state as the controller's stop does, while
// it answers; the sandbox a recorder of every call made to it.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import type { RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { RunStateGoneError } from '../../operator/src/workers/errors/run-state-gone-error.ts';
import { RunStateStore, type RunState } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runEndedHarness, stopDeletesState, type AskedCall } from '../support/run-ended-harness.ts';

const server = redisServerForSuite();

const writes = { toolName: 'write_file', input: { path: 'written.txt', content: 'hi' } };
const reads = { toolName: 'read_file', input: { path: 'README.md' } };

/**
 * A run at step 0 whose model answers with `call` after `meanwhile` (the controller's stop,
 * here), on a replica holding no copy of the run, its sandbox recording every call.
 */
function runAnswering(call: AskedCall, meanwhile: (h: { states: RunStateStore; ref: RunRef }) => Promise<void>) {
  return runEndedHarness(server.redis, {
    prefix: 'ended-during-model-call',
    model: 'ends-meanwhile',
    answer: async (run) => {
      await meanwhile(run);
      return [call];
    },
    onReplicaHoldingNoCopy: true,
  });
}

const withCancel = (run: CodingRun) => ({
  ...run,
  metadata: { ...run.metadata, annotations: { ...run.metadata.annotations, [CANCEL_ANNOTATION]: 'wrong branch' } },
});

describe('a step whose run ended during the model call, on a replica holding no copy of the run', () => {
  it.each([
    ['a call that changes the workspace (the state saved before it, only over one still there)', writes],
    ['a read (nothing saved before it: the state looked for)', reads],
  ])('runs no tool call for %s, and does not bring the state back', async (_what, call) => {
    const h = await runAnswering(call, stopDeletesState);
    const outcome = await h.step(0);
    expect(h.sandboxCalls).toEqual([]);
    expect(outcome).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(h.enqueued).toEqual([]);
    // Only the step's start read the run: the look cost no request to the API server.
    expect(h.runReads()).toBe(1);
  });

  it('runs its calls while the state is there', async () => {
    const h = await runAnswering(writes, async () => {});
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.tool)).toContain('write_file');
    expect(h.enqueued).toEqual(['step 1']);
  });

  it('a held copy showing a cancel, the run ended too (its state gone): the answer is not saved back, and no call runs', async () => {
    const h = await runAnswering(writes, stopDeletesState);
    h.deps.getRunHeld = () => withCancel(h.gateway.current()!);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls).toEqual([]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
  });
});

describe('a step in flight redone (an earlier try got the answer and died)', () => {
  it('reads the run once for both its cancel look and its calls', async () => {
    const h = await runAnswering(reads, async () => {});
    const state = (await h.states.load(h.ref))!;
    const call = { toolCallId: 'c9', ...reads };
    state.messages.push({ role: 'assistant', content: [{ type: 'tool-call', ...call }] });
    state.step = 1;
    state.inFlight = {
      calls: [call],
      results: [],
      earlier: [],
      hadToolCalls: true,
      toolNames: [call.toolName],
      text: '',
      resumed: false,
      record: { startedAt: new Date().toISOString() },
    };
    await h.states.save(state);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.tool)).toContain('read_file');
    expect(h.runReads()).toBe(1);
  });
});

describe('RunStateStore.save ifPresent', () => {
  const state = (uid: string): RunState => startingState({ uid, namespace: 'agents', name: uid }, Date.now());

  it('writes over a state that is there', async () => {
    const states = new RunStateStore(server.redis, 'save-if-present', RunStateSeal.generated());
    await states.create(state('there'));
    const moved = { ...state('there'), step: 3 };
    await states.save(moved, { ifPresent: true });
    expect((await states.load(moved))!.step).toBe(3);
  });

  it('writes nothing where the state is gone, the tally included, and says so', async () => {
    const states = new RunStateStore(server.redis, 'save-if-present', RunStateSeal.generated());
    await states.create(state('gone'));
    await states.delete(state('gone'));
    const failure = await states.save(state('gone'), { ifPresent: true }).catch((error: unknown) => error);
    expect(RunStateGoneError.isInstance(failure)).toBe(true);
    expect(await states.loadText('gone')).toBeUndefined();
    expect(await states.exists('gone')).toBe(false);
    expect(await server.redis.hexists('save-if-present:state-bytes:agents', 'gone')).toBe(0);
  });
});
