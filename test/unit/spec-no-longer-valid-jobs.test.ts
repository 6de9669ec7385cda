// The agent's jobs for a run that still lives but whose spec no longer parses by this operator's
// rules (an upgrade refused a field an older operator accepted: here a CHAMVI_* env name). The
// controller ends such a started run Failed InvalidSpec keeping its diff against the commit the
// run's state names (decide.ts, run-reconciler.ts keepDiff). A job that read it as ended let the
// run go and deleted that state first, so the diff kept had no revision and the spec.continueFrom
// its message suggests was refused. Each job now keeps the state, does nothing more and is put
// off (its tries unspent) until the controller's ending removes it. The jobs run through
// runAgentJob, as the worker runs them, with in-memory dependencies that record what they did.
import { describe, expect, it } from 'vitest';
import { FAILURE_MESSAGES } from '../../operator/src/api/failure-messages.ts';
import { REASONS, RunFailure, type CodingRun, type CodingRunStatus } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { AwaitingAcceptanceError } from '../../operator/src/workers/errors/awaiting-acceptance-error.ts';
import { CancelRequestedError } from '../../operator/src/workers/errors/cancel-requested-error.ts';
import { SpecNoLongerValidError } from '../../operator/src/workers/errors/spec-no-longer-valid-error.ts';
import { failRun } from '../../operator/src/workers/fail-run.ts';
import { CANCEL_RECHECK_DELAY_MS, decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { heldRunToActOn, liveRun, runNow } from '../../operator/src/workers/live-run.ts';
import { runPrepareJob } from '../../operator/src/workers/prepare-job.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { runningCodingRun } from '../support/running-coding-run.ts';

const ref = { namespace: 'agents', name: 'refused', uid: 'uid-refused' };
const REVISION = 'a'.repeat(40);

/** Running, with an env name this operator refuses (an older one accepted it). */
const refusedRun = (annotations?: Record<string, string>): CodingRun => {
  const run = runningCodingRun(ref, {
    budget: { maxSteps: 20, timeout: '30m' },
    sandbox: { env: [{ name: 'CHAMVI_WORKSPACE', value: '/' }] },
  } as Partial<CodingRun['spec']>);
  return annotations ? { ...run, metadata: { ...run.metadata, annotations } } : run;
};

const call = { toolCallId: 'c1', toolName: 'read_file', input: { path: 'README.md' } };
const inFlight = (resumed: boolean): NonNullable<RunState['inFlight']> => ({
  calls: [call],
  results: [],
  earlier: [],
  hadToolCalls: true,
  toolNames: [call.toolName],
  text: '',
  resumed,
  record: { startedAt: '2026-11-30T00:00:00Z' },
});
const pendingApproval = {
  id: 'approval-1',
  toolCallId: 'c1',
  toolName: 'bash' as const,
  input: { command: './deploy.sh' },
  requestedAt: '2026-11-30T00:00:00Z',
  results: [],
  remaining: [],
};

/** A started run's state (its clone's commit named) at `over`. */
const stateWith = (over: Partial<RunState>): RunState => ({
  ...startingState(ref, Date.now(), undefined, { revision: REVISION }),
  ...over,
});

/**
 * The job's dependencies over `run` and `state` (a function: it may throw, as a load of a state
 * that does not verify does), and what the job did through them. Nothing past the run's read is
 * given: a job that went on would fail on it, and the test would show that.
 */
function world(run: CodingRun, state: () => RunState | undefined) {
  const done = {
    statesDeleted: 0,
    statesSaved: 0,
    statuses: [] as CodingRunStatus[],
    progress: 0,
    events: [] as { type: string; reason: string }[],
    enqueued: [] as string[],
    released: [] as string[],
    modelsAsked: 0,
    sandboxesOpened: 0,
    warned: [] as string[],
  };
  const deps = {
    states: {
      load: async () => state(),
      delete: async () => void done.statesDeleted++,
      save: async () => void done.statesSaved++,
    },
    status: {
      write: async (
        _namespace: string,
        _name: string,
        _uid: string,
        change: (status: CodingRunStatus, run: CodingRun) => CodingRunStatus,
      ) => {
        const status = change({ ...run.status }, run);
        done.statuses.push(status);
        return { written: true, run: { ...run, status } };
      },
      progress: async () => void done.progress++,
    },
    queue: {
      step: async (_ref: unknown, completed: number) => void done.enqueued.push(`step ${completed}`),
      finalize: async () => void done.enqueued.push('finalize'),
      publish: async () => void done.enqueued.push('publish'),
    },
    events: { record: async (_run: CodingRun, event: { type: string; reason: string }) => void done.events.push(event) },
    sandboxes: {
      for: () => {
        done.sandboxesOpened++;
        throw new Error('no sandbox in this test');
      },
      release: async (uid: string) => void done.released.push(uid),
    },
    models: async () => {
      done.modelsAsked++;
      throw new Error('no model in this test');
    },
    resources: {},
    transcript: { append: async () => undefined },
    metrics: { execErrors: { inc() {} }, modelCallErrors: { inc() {} }, runsFinished: { inc() {} }, runDuration: { observe() {} } },
    getRun: async () => run,
    getRunFresh: async () => run,
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1000 },
    logger: {
      info() {},
      warn: (_fields: object, message: string) => void done.warned.push(message),
      error() {},
      child: () => deps.logger,
    },
    now: () => new Date(),
  } as unknown as AgentDependencies;
  return { deps, done };
}

/** Runs the job as the worker does; what it threw, and the delays it was put off by. */
async function runJob(deps: AgentDependencies, name: AgentJob['name'], data: Partial<AgentJob['data']> = {}) {
  const putOff: number[] = [];
  const outcome = await runAgentJob(deps, {
    name,
    data: { ...ref, ...data },
    attempt: 1,
    attempts: 10,
    putOff: async (delayMs) => {
      putOff.push(delayMs);
      throw new Error('put off');
    },
  }).then(
    () => 'done' as const,
    (error: unknown) => error,
  );
  return { outcome, putOff };
}

describe('a run whose spec no longer parses, as its jobs read it', () => {
  it('is neither live nor ended: runNow says why, and liveRun (for looks that need no more) gives no run', async () => {
    expect(parseSpec(refusedRun()).ok).toBe(false);
    const deps = { getRun: async () => refusedRun() };
    expect(await runNow(deps, ref)).toEqual({ specInvalid: expect.stringContaining('CHAMVI_') });
    expect(await liveRun(deps, ref)).toBeUndefined();
    expect(await runNow({ getRun: async () => ({ ...refusedRun(), status: { phase: 'Failed' } }) }, ref)).toEqual({ ended: true });
  });

  it('a held copy of it is no copy the model call may go on for', () => {
    expect(heldRunToActOn(refusedRun(), ref)).toEqual({ specInvalid: expect.stringContaining('CHAMVI_') });
    expect(heldRunToActOn({ ...refusedRun(), status: { phase: 'Failed' } }, ref)).toEqual({ ended: true });
    expect(heldRunToActOn(runningCodingRun(ref, { budget: { maxSteps: 20, timeout: '30m' } }), ref)).toEqual({ run: expect.anything() });
  });

  it('puts a job off, its tries unspent, as a cancel requested does, and says what the job did not do', () => {
    const error = new SpecNoLongerValidError('ask the model', 'spec.sandbox.env.0.name: may not start with CHAMVI_');
    expect(decideJobFailure(error, { name: 'step', attempt: 10, attempts: 10 })).toEqual({
      action: 'delay',
      delayMs: CANCEL_RECHECK_DELAY_MS,
      why: 'SpecNoLongerValidError',
    });
    expect(SpecNoLongerValidError.isInstance(error)).toBe(true);
    expect(SpecNoLongerValidError.isInstance(new CancelRequestedError('ask the model'))).toBe(false);
    expect(error.message).toContain('did not ask the model');
    expect(error.message).toContain('CHAMVI_');
    // The refusal quotes the run author's words: cut.
    expect(new SpecNoLongerValidError('ask the model', 'x'.repeat(5000)).message.length).toBeLessThan(1000);
    expect(error.name).toBe('SpecNoLongerValidError');
  });
});

describe('a job of a started run whose spec no longer parses keeps its state and is put off', () => {
  it.each<[string, AgentJob['name'], Partial<AgentJob['data']>, Partial<RunState>]>([
    ['a step about to ask the model', 'step', { step: 0 }, {}],
    ['a step in flight redone (an earlier try got the answer)', 'step', { step: 0 }, { step: 1, inFlight: inFlight(false) }],
    ['a finalize', 'finalize', {}, { stage: 'finalizing', step: 3 }],
    [
      "a resume of an approval's answer",
      'resume',
      { approval: { id: 'approval-1', decision: 'deny' } },
      { stage: 'waiting', step: 1, pendingApproval },
    ],
    ['a publish', 'publish', {}, { stage: 'publishing', step: 3, publish: { diffSha256: 'b'.repeat(64) } }],
    // handOn's continueStep: a publish job redone over a step a resume began.
    ['a hand-on finishing a step an approval resumed', 'publish', {}, { step: 2, inFlight: inFlight(true) }],
    // handOn's waiting branch: a step job redone after the step parked the run for an approval.
    ['a hand-on showing the approval the run waits for again', 'step', { step: 0 }, { stage: 'waiting', step: 1, pendingApproval }],
  ])('%s', async (_what, name, data, over) => {
    const { deps, done } = world(refusedRun(), () => stateWith(over));
    const { outcome, putOff } = await runJob(deps, name, data);
    // The state whose commit the controller's InvalidSpec ending takes the diff against stays.
    expect(done.statesDeleted).toBe(0);
    expect(done.released).toEqual([]);
    expect(putOff).toEqual([CANCEL_RECHECK_DELAY_MS]);
    expect(outcome).toEqual(new Error('put off'));
    // And nothing more was done for the run.
    expect(done.statuses).toEqual([]);
    expect(done.events).toEqual([]);
    expect(done.enqueued).toEqual([]);
    expect(done.modelsAsked).toBe(0);
    expect(done.sandboxesOpened).toBe(0);
  });

  it('a prepare is put off too, neither cloning nor opening the sandbox', async () => {
    const { deps, done } = world(refusedRun(), () => undefined);
    const { putOff } = await runJob(deps, 'prepare', { podName: 'refused-pod' });
    expect(putOff).toEqual([CANCEL_RECHECK_DELAY_MS]);
    expect(done.sandboxesOpened).toBe(0);
    expect(done.statuses).toEqual([]);
  });
});

describe("a worker's failure of a run whose spec no longer parses is left to the controller's InvalidSpec", () => {
  it('writes no status, diff nor Event, and keeps the state the diff is taken against', async () => {
    const { deps, done } = world(refusedRun(), () => stateWith({ step: 3 }));
    await failRun(deps, ref, REASONS.AgentFailed, 'The step job failed 10 times.');
    expect(done.statuses).toEqual([]);
    expect(done.events).toEqual([]);
    expect(done.sandboxesOpened).toBe(0);
    expect(done.statesDeleted).toBe(0);
    expect(done.warned.join('\n')).toContain('InvalidSpec');
  });
});

describe('a prepare that finds a state that does not verify, on a run with a cancel requested', () => {
  const cancelled = () => runningCodingRun(ref, { budget: { maxSteps: 20, timeout: '30m' } });
  const withCancel = (run: CodingRun): CodingRun => ({
    ...run,
    metadata: { ...run.metadata, annotations: { [CANCEL_ANNOTATION]: 'wrong branch' } },
  });
  const tampered = () => {
    // As RunStateStore.load throws it (run-state.ts stateInvalid).
    throw new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateInvalid('its seal does not match'));
  };

  it("writes no Failed/StateLost over the controller's Cancelled, and still drops what the agent holds", async () => {
    const { deps, done } = world(withCancel(cancelled()), tampered);
    expect(await runJob(deps, 'prepare')).toEqual({ outcome: 'done', putOff: [] });
    expect(done.statuses).toEqual([]);
    expect(done.events).toEqual([]);
    expect(done.statesDeleted).toBe(1);
    expect(done.warned.join('\n')).toContain('Cancelled');
  });

  it('without a cancel requested, still fails the run StateLost', async () => {
    const { deps, done } = world(cancelled(), tampered);
    await runJob(deps, 'prepare');
    expect(done.statuses.at(-1)).toMatchObject({ phase: 'Failed', reason: REASONS.StateLost });
  });
});

// A run given a warm pool pod is accepted in the write made after its agent is queued, so its
// prepare may read it first: a run naming a CodingRunTemplate then holds no status.template, and
// parseSpec refuses it (TemplateNotFound). That is no spec refused: the controller is about to
// accept the run, not to end it InvalidSpec. The job read it fresh every 25 ms for 5 s (about 190
// GETs, issue #17), then was put off as SpecNoLongerValidError, and every try read it as often.
describe("a warm pool's templated run read before the write that accepts it", () => {
  const awaiting = (over: Partial<CodingRun['metadata']> = {}): CodingRun => {
    const run = runningCodingRun(ref, { templateRef: { name: 'deps' } } as Partial<CodingRun['spec']>);
    return { ...run, metadata: { ...run.metadata, ...over }, status: { phase: 'Pending' } };
  };
  /** getRun's copy is `run`, and every fresh read too; the fresh reads are counted. */
  const counted = (run: CodingRun) => {
    const reads = { fresh: 0 };
    return { reads, deps: { getRun: async () => run, getRunFresh: async () => (reads.fresh++, run) } };
  };

  it('is neither a run, ended, nor a spec refused, after at most 45 fresh reads, not ~190', async () => {
    const { deps, reads } = counted(awaiting());
    expect(await runNow(deps, ref)).toEqual({ awaitsAcceptance: true });
    expect(reads.fresh).toBeGreaterThan(0);
    expect(reads.fresh).toBeLessThanOrEqual(45);
    expect(heldRunToActOn(awaiting(), ref)).toEqual({ awaitsAcceptance: true });
  }, 10_000);

  it('being deleted, is ended at once, with no read again', async () => {
    const { deps, reads } = counted(awaiting({ deletionTimestamp: '2026-12-07T00:00:00Z' }));
    expect(await runNow(deps, ref)).toEqual({ ended: true });
    expect(reads.fresh).toBe(0);
  });

  it('puts its prepare off as awaiting acceptance, its message not the InvalidSpec ending, doing nothing', async () => {
    const { deps, done } = world(awaiting(), () => undefined);
    let fresh = 0;
    deps.getRunFresh = async () => (fresh++, awaiting());
    const error = await runPrepareJob(deps, ref, 'warm-pod').catch((thrown: unknown) => thrown);
    expect((error as Error).name).toBe('AwaitingAcceptanceError');
    expect(AwaitingAcceptanceError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('not accepted yet');
    expect((error as Error).message).not.toContain('InvalidSpec');
    expect(decideJobFailure(error, { name: 'prepare', attempt: 1, attempts: 10 })).toEqual({
      action: 'delay',
      delayMs: CANCEL_RECHECK_DELAY_MS,
      why: 'AwaitingAcceptanceError',
    });
    expect(fresh).toBeLessThanOrEqual(45);
    expect(done.sandboxesOpened).toBe(0);
    expect(done.statesSaved).toBe(0);
    expect(done.statuses).toEqual([]);
  }, 10_000);

  it("a job's failure with its tries spent is written, not left to an InvalidSpec ending that does not come", async () => {
    const { deps, done } = world(awaiting(), () => undefined);
    await failRun(deps, ref, REASONS.AgentFailed, 'The prepare job failed 10 times.', false);
    expect(done.statuses.at(-1)).toMatchObject({ phase: 'Failed', reason: REASONS.AgentFailed });
    expect(done.warned.join('\n')).not.toContain('InvalidSpec');
  }, 10_000);
});
