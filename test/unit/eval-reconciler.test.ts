// The eval reconciler against a gateway that records what it is asked and answers as the API
// server would: what it creates, what it writes to the eval's status, when it grades. Two
// things the API server does that the pure decision cannot see: it raises a run's generation
// when it marks it for deletion (its finalizer keeps it a while), and it refuses a status that
// makes the eval larger than etcd stores.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingEval, CodingEvalStatus } from '../../operator/src/api/coding-eval.ts';
import { CREATOR_ANNOTATION } from '../../operator/src/reconcile/approval-answer.ts';
import { EvalReconciler } from '../../operator/src/controller/eval-reconciler.ts';
import type { EvalGateway } from '../../operator/src/kube/eval-gateway.ts';
import { attemptRunFixture, codingEvalFixture } from '../support/coding-eval-fixture.ts';

const NOW = new Date('2026-11-30T12:00:00Z');

const evaluationOf = (attempts: number, status?: CodingEvalStatus): CodingEval => codingEvalFixture({ spec: { attempts }, status });

/** The attempt's run as the API server holds it after the eval created it. */
const madeRun = (evaluation: CodingEval, attempt: number, status?: CodingRun['status']): CodingRun =>
  attemptRunFixture(evaluation, attempt, { status });

/** The run as a person's delete leaves it while the operator's finalizer holds it: generation raised. */
const deleting = (run: CodingRun): CodingRun => ({
  ...run,
  metadata: { ...run.metadata, generation: 2, deletionTimestamp: NOW.toISOString(), finalizers: ['chamvi.dev/finalizer'] },
});

const tooLarge = () =>
  Object.assign(new Error('HTTP-Code: 500 Message: Unknown API Status Code!'), {
    code: 500,
    body: JSON.stringify({ kind: 'Status', status: 'Failure', message: 'etcdserver: request is too large', code: 500 }),
  });

/**
 * An eval reconciler over caches the test sets, and a gateway holding runs by name. refuseStatus:
 * true refuses the status write as etcd refuses one too large; an Error fails it with that.
 */
function world(options: {
  evaluation: CodingEval;
  runs?: CodingRun[];
  refuseStatus?: (status: CodingEvalStatus) => boolean | Error;
  /** An error the API server answers each create with. */
  refuseCreate?: () => Error;
}) {
  let evaluation = options.evaluation;
  let runs = options.runs ?? [];
  /** What the API server holds under each name (the cache may lag behind it). */
  const server = new Map<string, CodingRun>(runs.map((run) => [run.metadata.name, run]));
  const created: string[] = [];
  const writes: CodingEvalStatus[] = [];
  const events: Array<{ type: string; reason: string; message: string }> = [];
  let transcriptReads = 0;
  const gateway: EvalGateway = {
    async createRun(run) {
      if (options.refuseCreate) throw options.refuseCreate();
      if (server.has(run.metadata.name)) return 'exists';
      created.push(run.metadata.name);
      server.set(run.metadata.name, run as unknown as CodingRun);
      return 'created';
    },
    getRun: async (_namespace, name) => server.get(name),
    async listTranscript() {
      transcriptReads += 1;
    },
    getDiffConfigMap: async () => undefined,
    async replaceEvalStatus(_evaluation, status) {
      const refusal = options.refuseStatus?.(status);
      if (refusal instanceof Error) throw refusal;
      if (refusal) throw tooLarge();
      writes.push(status);
      evaluation = { ...evaluation, status };
      return evaluation;
    },
    async recordEvent(_evaluation, event) {
      events.push(event);
    },
  };
  const reconciler = new EvalReconciler({
    evals: { get: () => evaluation, list: () => [evaluation] },
    runs: { get: (_namespace, name) => runs.find((run) => run.metadata.name === name), list: () => runs },
    gateway,
    identity: 'test',
    logger: { info: () => {}, warn: () => {} },
    now: () => NOW,
  });
  return {
    reconcile: () => reconciler.reconcile('team/bench'),
    /** The runs the cache holds from now on, and the API server (the cache may not have seen them yet). */
    setRuns(cached: CodingRun[], held = cached) {
      runs = cached;
      server.clear();
      for (const run of held) server.set(run.metadata.name, run);
    },
    /** The eval as the cache holds it from now on. */
    setEvaluation(next: CodingEval) {
      evaluation = next;
    },
    get evaluation() {
      return evaluation;
    },
    created,
    writes,
    events,
    get transcriptReads() {
      return transcriptReads;
    },
  };
}

describe('an attempt whose run ended from a chamvi-finished-runs record', () => {
  // Written ahead for the attempt's computable name and spec, or applied by an operator from
  // before the rule that applies none to an eval's run: the run reports Succeeded at 0 tokens.
  it('is graded failed ForeignRun, not passed, with a Warning Event naming the run', async () => {
    const evaluation = evaluationOf(1);
    const run = madeRun(evaluation, 1, {
      phase: 'Succeeded',
      reason: 'AlreadyFinished',
      completionTime: NOW.toISOString(),
      result: { summary: '' },
    } as CodingRun['status']);
    const eval1 = world({ evaluation, runs: [run] });
    await eval1.reconcile();
    expect(eval1.evaluation.status?.attempts).toEqual([
      expect.objectContaining({ run: run.metadata.name, passed: false, failure: 'ForeignRun', reason: 'AlreadyFinished' }),
    ]);
    expect(eval1.evaluation.status?.passes).toBe(0);
    expect(eval1.events).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'Warning', reason: 'ForeignRun', message: expect.stringContaining(run.metadata.name) }),
      ]),
    );
  });
});

describe("an eval's run deleted before it was graded", () => {
  const evaluation = evaluationOf(1);
  const run = madeRun(evaluation, 1, { phase: 'Running' });

  it('is neither graded nor foreign while it is being deleted, and is made again once gone', async () => {
    const eval1 = world({ evaluation, runs: [deleting(run)] });
    const result = await eval1.reconcile();
    expect(eval1.created).toEqual([]);
    expect(eval1.evaluation.status?.attempts ?? []).toEqual([]);
    expect(eval1.evaluation.status?.phase).toBe('Running');
    expect(eval1.events.map((event) => event.reason)).not.toContain('ForeignRun');
    expect(result).toEqual({ requeueAfterMs: expect.any(Number) });

    eval1.setRuns([]);
    await eval1.reconcile();
    expect(eval1.created).toEqual([run.metadata.name]);
    expect(eval1.evaluation.status?.attempts ?? []).toEqual([]);
  });

  it('waits for it too when only the API server holds it (the cache has not seen the run)', async () => {
    const eval1 = world({ evaluation });
    eval1.setRuns([], [deleting(run)]);
    const result = await eval1.reconcile();
    expect(eval1.created).toEqual([]);
    expect(eval1.evaluation.status?.attempts ?? []).toEqual([]);
    expect(eval1.events.map((event) => event.reason)).not.toContain('ForeignRun');
    expect(result).toEqual({ requeueAfterMs: expect.any(Number) });

    eval1.setRuns([]);
    await eval1.reconcile();
    expect(eval1.created).toEqual([run.metadata.name]);
  });

  it('still fails ForeignRun for a run another author made under the name after', async () => {
    const byBob = madeRun(evaluation, 1, { phase: 'Succeeded' });
    byBob.metadata.annotations = { [CREATOR_ANNOTATION]: 'bob' };
    byBob.metadata.uid = 'bobs-run';
    const eval1 = world({ evaluation, runs: [byBob] });
    await eval1.reconcile();
    expect(eval1.created).toEqual([]);
    expect(eval1.evaluation.status?.attempts).toEqual([expect.objectContaining({ attempt: 1, reason: 'ForeignRun', passed: false })]);
    expect(eval1.transcriptReads).toBe(0);
  });
});

describe('an eval whose status grows past what the API server stores', () => {
  const evaluation = evaluationOf(3);
  const finished = (attempt: number) => madeRun(evaluation, attempt, { phase: 'Succeeded', reason: 'Completed', steps: 1 });
  const withAttempts = (status: CodingEvalStatus) => status.attempts !== undefined;

  it('stops Failed StatusTooLarge with its figures and what to change, and neither grades nor creates again', async () => {
    const eval1 = world({ evaluation, runs: [finished(1)], refuseStatus: withAttempts });
    const result = await eval1.reconcile();
    expect(eval1.transcriptReads).toBe(1);
    expect(eval1.writes).toHaveLength(1);
    const status = eval1.evaluation.status!;
    expect(status).toMatchObject({ phase: 'Failed', reason: 'StatusTooLarge', planned: 3, graded: 1, completionTime: NOW.toISOString() });
    expect(status.attempts).toBeUndefined();
    expect(status.results).toEqual([expect.objectContaining({ task: 'fix', model: 'm', attempts: 1, passes: 1 })]);
    expect(status.message).toContain('too large for the API server to store');
    expect(status.message).toContain('Create a smaller eval');
    expect(status.conditions).toEqual([expect.objectContaining({ type: 'Complete', status: 'True', reason: 'StatusTooLarge' })]);
    expect(eval1.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'StatusTooLarge' }));
    expect(result).toBeUndefined();

    // Attempt 2's run (made in that pass) finishes: nothing is graded, written or created.
    const createdBefore = eval1.created.length;
    eval1.setRuns([finished(1), finished(2)]);
    await eval1.reconcile();
    expect(eval1.transcriptReads).toBe(1);
    expect(eval1.writes).toHaveLength(1);
    expect(eval1.created).toHaveLength(createdBefore);
  });

  it('does not grade again before the cache brings the status that says so', async () => {
    const eval1 = world({ evaluation, runs: [finished(1)], refuseStatus: withAttempts });
    await eval1.reconcile();
    eval1.setEvaluation(evaluation);
    await eval1.reconcile();
    expect(eval1.transcriptReads).toBe(1);
    expect(eval1.writes).toHaveLength(1);
  });

  it('keeps only the counts when the figures do not fit either', async () => {
    const eval1 = world({
      evaluation,
      runs: [finished(1)],
      refuseStatus: (status) => withAttempts(status) || status.results !== undefined,
    });
    await eval1.reconcile();
    expect(eval1.evaluation.status).toMatchObject({ phase: 'Failed', reason: 'StatusTooLarge', graded: 1, passes: 1 });
    expect(eval1.evaluation.status!.results).toBeUndefined();
    expect(eval1.evaluation.status!.message).toContain('status.attempts and status.results are left out');
  });

  it('says so in a Warning Event and does not grade again when no status fits', async () => {
    const eval1 = world({ evaluation, runs: [finished(1)], refuseStatus: () => true });
    await expect(eval1.reconcile()).resolves.toBeUndefined();
    expect(eval1.writes).toEqual([]);
    expect(eval1.events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'StatusTooLarge' }));
    await eval1.reconcile();
    expect(eval1.transcriptReads).toBe(1);
  });

  it('still fails the pass on any other error of the status write, to be retried', async () => {
    const conflict = Object.assign(new Error('Conflict'), { code: 409 });
    const eval1 = world({ evaluation, runs: [finished(1)], refuseStatus: () => conflict });
    await expect(eval1.reconcile()).rejects.toBe(conflict);
    await expect(eval1.reconcile()).rejects.toBe(conflict);
    expect(eval1.transcriptReads).toBe(2);
  });
});

describe("an attempt whose run the API server will not store (etcd's size limit)", () => {
  const evaluation = evaluationOf(2);
  const runTooLarge = (code: number, message: string) =>
    Object.assign(new Error(`HTTP-Code: ${code}`), {
      code,
      body: JSON.stringify({ kind: 'Status', status: 'Failure', message, code }),
    });

  // Thrown, the eval was retried for ever before its first status write: no phase, no reason.
  it.each([
    ['etcd refuses it (500)', () => runTooLarge(500, 'etcdserver: request is too large')],
    ['the API server refuses it (413)', () => runTooLarge(413, 'Request entity too large: limit is 3145728')],
  ])('fails the attempt RunRefused, saying what to shorten, when %s', async (_, refusal) => {
    const eval1 = world({ evaluation, refuseCreate: refusal });
    await expect(eval1.reconcile()).resolves.toBeUndefined();
    const status = eval1.evaluation.status!;
    expect(status.phase).toBe('Running');
    expect(status.attempts).toEqual([
      expect.objectContaining({
        attempt: 1,
        passed: false,
        failure: 'RunRefused',
        failedGraders: [
          expect.stringMatching(
            /too large to store \(HTTP \d+\): shorten the task's text, sandbox or verify, or the model's instructions$/,
          ),
        ],
      }),
    ]);
    expect(eval1.events).toContainEqual(
      expect.objectContaining({ type: 'Warning', reason: 'RunRefused', message: expect.stringContaining('too large to store') }),
    );

    // The next attempt meets the same refusal, and the eval completes with both failed.
    await eval1.reconcile();
    expect(eval1.evaluation.status).toMatchObject({ phase: 'Complete', graded: 2, passes: 0 });
  });

  it('still fails the pass on any other 500 of the create, to be retried', async () => {
    const failure = runTooLarge(500, 'etcdserver: request timed out');
    const eval1 = world({ evaluation, refuseCreate: () => failure });
    await expect(eval1.reconcile()).rejects.toBe(failure);
    expect(eval1.writes).toEqual([]);
  });
});

// Grader paths such as test/ were accepted before they had to be written as git prints them; an
// eval stored then meets an operator that refuses its spec.
describe('an eval with a grader path this operator refuses and an older one accepted', () => {
  const withPath = (path: string, attempts: number) =>
    codingEvalFixture({
      spec: {
        attempts,
        tasks: [
          {
            name: 'fix',
            task: 'Fix the bug.',
            repository: { url: 'https://example.com/r.git' },
            graders: [
              { type: 'max-turns', max: 5 },
              { type: 'file-unchanged', path },
            ],
          },
        ],
      },
    });
  /**
   * The eval with path test as the older operator left it (the attempts `finished` graded, the next
   * run made), read back with test/, and the runs it has.
   */
  const gradedBefore = async (attempts: number, finished: number[]) => {
    const accepted = withPath('test', attempts);
    const runs = finished.map((attempt) => madeRun(accepted, attempt, { phase: 'Succeeded', reason: 'Completed', steps: 1 }));
    const older = world({ evaluation: accepted, runs });
    await older.reconcile();
    const stored: CodingEval = { ...withPath('test/', attempts), status: older.evaluation.status! };
    return { stored, runs: [...runs, ...older.created.map((_, index) => madeRun(accepted, finished.length + 1 + index))] };
  };

  it('leaves the status of one that completed as it is, its figures and attempts included', async () => {
    const { stored, runs } = await gradedBefore(2, [1, 2]);
    expect(stored.status).toMatchObject({ phase: 'Complete', graded: 2 });
    expect(stored.status!.results).toHaveLength(1);
    const before = structuredClone(stored.status);

    const eval1 = world({ evaluation: stored, runs });
    await expect(eval1.reconcile()).resolves.toBeUndefined();
    expect(eval1.writes).toEqual([]);
    expect(eval1.events).toEqual([]);
    expect(eval1.created).toEqual([]);
    expect(eval1.transcriptReads).toBe(0);
    expect(eval1.evaluation.status).toEqual(before);
  });

  it('fails one still running InvalidSpec, keeping the attempts and figures graded so far and saying what to change', async () => {
    const { stored, runs } = await gradedBefore(3, [1, 2]);
    expect(stored.status).toMatchObject({ phase: 'Running', graded: 2 });
    const before = structuredClone(stored.status!);

    const eval1 = world({ evaluation: stored, runs });
    await eval1.reconcile();
    const status = eval1.evaluation.status!;
    expect(status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec', planned: 3, graded: 2, passes: before.passes });
    expect(status.attempts).toEqual(before.attempts);
    expect(status.results).toEqual(before.results);
    expect(status.message).toContain('not test/');
    expect(status.message).toContain('The 2 attempt(s) graded before are kept');
    expect(status.message).toContain('Create a new eval with the spec corrected');
    expect(eval1.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'InvalidSpec' })]);
    expect(eval1.created).toEqual([]);
    expect(eval1.transcriptReads).toBe(0);
  });
});
