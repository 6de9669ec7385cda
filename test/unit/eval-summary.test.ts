// The figures per task × model (evals/eval-summary.ts): an attempt whose run never ran (refused
// by the API server, a foreign run, one ended AlreadyFinished from a chamvi-finished-runs record)
// is a failed attempt, but its zero tokens and seconds are no measurement of the model.
import { describe, expect, it } from 'vitest';
import type { AttemptStatus, CodingEvalSpec } from '../../operator/src/api/coding-eval.ts';
import { foreignAttempt, refusedAttempt } from '../../operator/src/evals/decide-eval.ts';
import { summarise } from '../../operator/src/evals/eval-summary.ts';

const spec = { tasks: [{ name: 'fix' }], models: [{ name: 'm' }], passAtK: [1, 3] } as unknown as Pick<
  CodingEvalSpec,
  'tasks' | 'models' | 'passAtK'
>;
const cell = (attempt: number) => ({ task: 'fix', model: 'm', attempt });

const ran = (attempt: number, totalTokens: number, durationSeconds: number, passed = true): AttemptStatus => ({
  run: `r${attempt}`,
  ...cell(attempt),
  phase: 'Succeeded',
  passed,
  ...(passed ? {} : { failure: 'grader:verify' }),
  totalTokens,
  durationSeconds,
});

/** A run that ended from a chamvi-finished-runs record: graded ForeignRun, with what the record said. */
const endedAlreadyFinished = (attempt: number): AttemptStatus => ({
  run: `r${attempt}`,
  ...cell(attempt),
  phase: 'Succeeded',
  reason: 'AlreadyFinished',
  passed: false,
  failure: 'ForeignRun',
  totalTokens: 0,
  durationSeconds: 0,
});

describe('summarise', () => {
  it('leaves attempts that never ran out of tokens and duration, and counts them in attempts and the pass rate', () => {
    const attempts = [
      ran(1, 100_000, 600),
      ran(2, 120_000, 700, false),
      foreignAttempt('r3', cell(3)),
      refusedAttempt('r4', cell(4), 'denied by allowRepo'),
      endedAlreadyFinished(5),
    ];
    const [result] = summarise(spec, attempts);
    expect(result).toMatchObject({
      attempts: 5,
      passes: 1,
      passRate: 0.2,
      ran: 2,
      tokens: { mean: 110_000, p50: 100_000, p90: 120_000 },
      durationSeconds: { mean: 650, p50: 600, p90: 700 },
      failures: [
        { reason: 'ForeignRun', count: 2 },
        { reason: 'grader:verify', count: 1 },
        { reason: 'RunRefused', count: 1 },
      ],
    });
    expect(result!.passAtK).toEqual([
      { k: 1, value: 0.2 },
      { k: 3, value: 0.6 },
    ]);
  });

  it('counts a run that ran and failed, at whatever cost, in the distributions', () => {
    const failedRun: AttemptStatus = { ...ran(2, 0, 5, false), phase: 'Failed', reason: 'BudgetExceeded', failure: 'BudgetExceeded' };
    const [result] = summarise(spec, [ran(1, 100, 10), failedRun]);
    expect(result).toMatchObject({ ran: 2, tokens: { mean: 50, p50: 0, p90: 100 }, durationSeconds: { mean: 7.5, p50: 5, p90: 10 } });
  });

  it('gives empty distributions, not the zeros of attempts that never ran, when no attempt ran', () => {
    const [result] = summarise(spec, [refusedAttempt('r1', cell(1), 'too large'), foreignAttempt('r2', cell(2))]);
    expect(result).toMatchObject({ attempts: 2, passes: 0, ran: 0, tokens: { mean: 0, p50: 0, p90: 0 } });
  });
});
