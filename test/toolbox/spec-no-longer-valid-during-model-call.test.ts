// A step whose run's spec stopped parsing while the model answered (to this operator's rules:
// here a CHAMVI_* env name, as an upgrade refuses one an older operator accepted). The look
// between the answer and its calls read that as the run ended: it let the run go, deleting the
// state whose commit the controller's InvalidSpec ending takes the diff against, or (from a held
// copy, which it did not parse) ran the calls. The answer is now kept as the step in flight, as
// for a cancel requested meanwhile, no call runs, and the job is put off. A real redis-server;
// the model a stand-in that changes the run while it answers; the sandbox a recorder.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { SpecNoLongerValidError } from '../../operator/src/workers/errors/spec-no-longer-valid-error.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runEndedHarness } from '../support/run-ended-harness.ts';

const server = redisServerForSuite();

const writes = { toolName: 'write_file', input: { path: 'written.txt', content: 'hi' } };

/** The run as the API server holds it after the upgrade: its spec one this operator refuses. */
const refused = (run: CodingRun): CodingRun => ({
  ...run,
  spec: { ...run.spec, sandbox: { env: [{ name: 'CHAMVI_WORKSPACE', value: '/' }] } } as CodingRun['spec'],
});

/** A run at step 0 whose spec stops parsing while its model answers with a write_file; `held`: the job's look reads a held copy. */
async function runRefusedDuringModelCall(held: boolean) {
  const turn = { refuse: () => {} };
  const h = await runEndedHarness(server.redis, {
    prefix: 'spec-refused-during-model-call',
    model: 'refused-meanwhile',
    answer: async () => {
      turn.refuse();
      return [writes];
    },
  });
  turn.refuse = () => {
    const now = refused(h.gateway.current()!);
    if (held) h.deps.getRunHeld = () => now;
    else h.deps.getRun = async () => now;
  };
  return h;
}

describe("a step whose run's spec stopped parsing during the model call", () => {
  it.each([
    ['read fresh (no held copy to look at)', false],
    ['from the copy this process holds', true],
  ])('keeps the answer as the step in flight, runs no call and is put off: %s', async (_how, held) => {
    const h = await runRefusedDuringModelCall(held);
    const outcome = await h.step(0);
    expect(h.sandboxCalls).toEqual([]);
    const state = await h.states.load(h.ref);
    expect(state?.inFlight?.calls.map((call) => call.toolName)).toEqual(['write_file']);
    expect(state?.step).toBe(1);
    expect(SpecNoLongerValidError.isInstance(outcome)).toBe(true);
    // Why it no longer parses reaches the job's log, whichever way the run was read.
    expect((outcome as Error).message).toContain('CHAMVI_');
    expect(h.enqueued).toEqual([]);
  });
});
