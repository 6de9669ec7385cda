// A step whose run ended while its tool calls ran (the controller's ending of a cancel, a
// deletion): the stop that ended it deleted the run's state in Redis and could not remove the
// running job. The save after each call that changes the workspace, and the step's save at its
// end, wrote the state back: the step's other calls ran against the sandbox the ending was
// deleting, the next step was queued, and for a Cancelled run (which the leftover-state sweep
// keeps) the state stayed in Redis, counted against its namespace's state-bytes budget, until
// the run was deleted. A real redis-server; the sandbox a recorder of every call made to it
// that, on the step's first call, deletes the state as the controller's stop does.
import { describe, expect, it } from 'vitest';
import { TrailingWrites } from '../../operator/src/workers/trailing-record.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runEndedHarness, stopDeletesState, type AskedCall } from '../support/run-ended-harness.ts';

const server = redisServerForSuite();

// Two calls on the same file keep their order (tool-call-ordering.ts): the second starts only once the first is kept.
const twoWrites = [
  { toolName: 'write_file', input: { path: 'written.txt', content: 'one' } },
  { toolName: 'write_file', input: { path: 'written.txt', content: 'two' } },
];
// Nothing is saved between reads: the step's save at its end is the one that would bring the state back.
const twoReads = [
  { toolName: 'read_file', input: { path: 'README.md' } },
  { toolName: 'read_file', input: { path: 'README.md' } },
];

/**
 * A run at step 0 whose model answers with `calls`; its sandbox records every call and, when
 * `stopOnFirstCall`, deletes the run's state during the first (the controller's stop).
 * `trailing`: the step's record trails its hand-over (trailing-record.ts), as in a deployment.
 */
function runAnswering(calls: readonly AskedCall[], stopOnFirstCall: boolean, trailing = false) {
  return runEndedHarness(server.redis, {
    prefix: 'ended-during-tool-calls',
    model: 'ends-during-calls',
    answer: async () => calls,
    duringSandboxCall: async (_request, run) => {
      if (stopOnFirstCall && run.sandboxCalls.length === 1) await stopDeletesState(run);
    },
    deps: trailing ? { trailing: new TrailingWrites() } : {},
  });
}

describe('a step whose run ended while its tool calls ran', () => {
  it('runs no more of its calls after a write whose save finds the state gone, and leaves no state and no tally entry', async () => {
    const h = await runAnswering(twoWrites, true);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.input)).toEqual([twoWrites[0]!.input]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it('still records the step with the call that ran and its result in the transcript', async () => {
    const h = await runAnswering(twoWrites, true);
    expect(await h.step(0)).toBe('done');
    const steps = h.transcript.filter((entry) => entry.kind === 'step');
    expect(steps).toHaveLength(1);
    expect(steps[0]!.calls!.map((call) => [call.tool, call.input.text, call.result !== undefined])).toEqual([
      ['write_file', JSON.stringify(twoWrites[0]!.input), true],
      ['write_file', JSON.stringify(twoWrites[1]!.input), false],
    ]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it('does not bring the state back after a step of one write, whose save waits for the diff snapshot', async () => {
    const h = await runAnswering(twoWrites.slice(0, 1), true);
    expect(await h.step(0)).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it.each([
    ['its record written before the save', false],
    ['its record trailing the save', true],
  ])('does not bring the state back at the end of a step of reads, nor queue the next step (%s)', async (_what, trailing) => {
    const h = await runAnswering(twoReads, true, trailing);
    expect(await h.step(0)).toBe('done');
    // The reads ran: the step is in the transcript all the same.
    expect(h.transcript.filter((entry) => entry.kind === 'step').map((entry) => entry.calls!.length)).toEqual([2]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it('runs both calls and goes on to the next step while the state is there', async () => {
    const h = await runAnswering(twoWrites, false);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.filter((request) => request.tool === 'write_file').map((request) => request.input)).toEqual(
      twoWrites.map((call) => call.input),
    );
    expect((await h.states.load(h.ref))?.step).toBe(1);
    expect(await h.tallied()).toBe(1);
    expect(h.enqueued).toEqual(['step 1']);
  });
});
