// A run cancelled (or deleted) while spec.verify.command ran: the check may take minutes, and
// the stop that ended the run deleted its state in Redis meanwhile. The save after the check was
// plain: it recreated the state (counted in its namespace's state bytes again), a retry verdict
// queued a step for the ended run, and the publish after a pass found a state to save over. A
// real redis-server; the sandbox a recorder whose check (a clean bash) is where the stop comes.
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { verifyWork } from '../../operator/src/workers/verify-work.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runEndedHarness, stopDeletesState } from '../support/run-ended-harness.ts';

const server = redisServerForSuite();

/** A run whose model finished at step 3 and whose check fails with retries left (a retry verdict). */
async function finishedRun(stopDuringCheck: boolean) {
  const h = await runEndedHarness(server.redis, {
    prefix: 'ended-during-verify',
    model: 'finished',
    spec: { verify: { command: 'npm test', required: true, retries: 2, protect: [], timeout: '10m' } } as never,
    answer: async () => [],
    duringSandboxCall: async (request, run) => {
      if (stopDuringCheck && request.tool === 'bash' && request.clean) await stopDeletesState(run);
    },
  });
  const state = (await h.states.load(h.ref))!;
  state.step = 3;
  state.stage = 'finalizing';
  state.finalText = 'done';
  await h.states.save(state);
  const verify = () => verifyWork(h.deps, h.gateway.current() as ParsedCodingRun, state);
  return { ...h, verify };
}

describe('a run ended while its work was verified', () => {
  it('leaves no state, no tally entry, and queues no step for the retry', async () => {
    const h = await finishedRun(true);
    expect(await h.verify()).toBe('again');
    expect(h.sandboxCalls.map((request) => request.tool)).toEqual(['bash']);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
    // The check ran: its transcript entry is there all the same.
    expect(h.transcript.filter((entry) => entry.kind === 'verify')).toHaveLength(1);
  });

  it('hands the failure back to the model while the state is there', async () => {
    const h = await finishedRun(false);
    expect(await h.verify()).toBe('again');
    expect((await h.states.load(h.ref))?.stage).toBe('stepping');
    expect(h.enqueued).toEqual(['step 3']);
  });
});
