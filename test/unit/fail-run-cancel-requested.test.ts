// failRun (workers/fail-run.ts) for a job that found no state for a run with a cancel requested.
// The controller's cancel stop removes the run's jobs, deletes its state, then writes Cancelled:
// a job queued after a save, or put off and run again after the stop, finds no state. It must
// leave the ending to the controller (Cancelled), not write Failed/StateLost over it, and still
// drop what the agent holds of the run.
import { describe, expect, it } from 'vitest';
import { FAILURE_MESSAGES } from '../../operator/src/api/failure-messages.ts';
import { REASONS } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { failRun } from '../../operator/src/workers/fail-run.ts';
import { FAILED_RUN_REF, failRunHarness } from '../support/fail-run-harness.ts';

const ref = FAILED_RUN_REF;

/** A Running run (with `annotations`) whose state is gone, and what failRun did to it. */
const stateGone = (annotations?: Record<string, string>) => failRunHarness({ annotations });

describe('failRun: a job finds no state for a run with a cancel requested', () => {
  it("writes no Failed/StateLost over the controller's Cancelled ending, keeps no diff, and still forgets the run", async () => {
    const { deps, done } = stateGone({ [CANCEL_ANNOTATION]: 'not needed' });
    await failRun(deps, ref, REASONS.StateLost, FAILURE_MESSAGES.stateGone);
    expect(done.written).toEqual([]);
    expect(done.events).toEqual([]);
    // The controller's ending takes the diff: a worker's final diff would race it.
    expect(done.diffsWritten).toBe(0);
    expect(done.statesDeleted).toBe(1);
    expect(done.released).toEqual([ref.uid]);
    expect(done.forgotten).toEqual([ref.uid]);
    expect(done.warned.join('\n')).toContain('cancel');
  });

  it('still fails a run without a cancel requested StateLost, with its Warning Event', async () => {
    const { deps, done } = stateGone();
    await failRun(deps, ref, REASONS.StateLost, FAILURE_MESSAGES.stateGone);
    expect(done.written.at(-1)).toMatchObject({ phase: 'Failed', reason: REASONS.StateLost });
    expect(done.events).toEqual([expect.objectContaining({ type: 'Warning', reason: REASONS.StateLost })]);
    expect(done.statesDeleted).toBe(1);
  });

  it('still fails a run with a cancel requested for a reason other than StateLost', async () => {
    const { deps, done } = stateGone({ [CANCEL_ANNOTATION]: '' });
    await failRun(deps, ref, REASONS.AgentFailed, 'The agent failed.');
    expect(done.written.at(-1)).toMatchObject({ phase: 'Failed', reason: REASONS.AgentFailed });
    expect(done.events).toEqual([expect.objectContaining({ type: 'Warning', reason: REASONS.AgentFailed })]);
  });
});
