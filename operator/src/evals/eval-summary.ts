// The figures per task × model from the graded attempts: attempts, passes, pass rate, pass@k,
// tokens and duration (mean, p50, p90) and failures by reason. Pure; the status and the report
// show exactly these. An attempt whose run never ran (refused by the API server, or ForeignRun)
// counts as a failed attempt but spends nothing: its zero tokens and seconds are no measurement,
// and in the distributions they made a model look cheaper and faster than its runs were.
import type { AttemptStatus, CodingEvalSpec, EvalResult } from '../api/coding-eval.ts';
import { distributionOf } from './distribution.ts';
import { passAtK } from './pass-at-k.ts';

const round = (value: number) => Math.round(value * 10_000) / 10_000;

/** The failure reason an attempt counts under: the run's reason, else its first failed grader. */
export const failureReasonOf = (attempt: AttemptStatus): string | undefined =>
  attempt.passed ? undefined : (attempt.failure ?? attempt.reason ?? attempt.phase);

/**
 * The failures of an attempt whose run never ran as the eval's: RunRefused (the API server
 * refused to create it) and ForeignRun (a run the eval did not make held its name, or the run
 * ended AlreadyFinished from a chamvi-finished-runs record without running).
 */
const NOT_RUN_FAILURES: ReadonlySet<string> = new Set(['RunRefused', 'ForeignRun']);

/** Whether the attempt's tokens and seconds measure a run: false for one that never ran (NOT_RUN_FAILURES). */
const ranItsRun = (attempt: AttemptStatus) => attempt.failure === undefined || !NOT_RUN_FAILURES.has(attempt.failure);

export function summarise(spec: Pick<CodingEvalSpec, 'tasks' | 'models' | 'passAtK'>, attempts: readonly AttemptStatus[]): EvalResult[] {
  return spec.tasks.flatMap((task) =>
    spec.models.map((model) => {
      const cell = attempts.filter((attempt) => attempt.task === task.name && attempt.model === model.name);
      const n = cell.length;
      const ran = cell.filter(ranItsRun);
      const c = cell.filter((attempt) => attempt.passed).length;
      const failures = new Map<string, number>();
      for (const attempt of cell) {
        const reason = failureReasonOf(attempt);
        if (reason) failures.set(reason, (failures.get(reason) ?? 0) + 1);
      }
      return {
        task: task.name,
        model: model.name,
        attempts: n,
        passes: c,
        passRate: n === 0 ? 0 : round(c / n),
        passAtK: [...spec.passAtK]
          .sort((a, b) => a - b)
          .filter((k) => k <= n)
          .map((k) => ({ k, value: round(passAtK(n, c, k)) })),
        ran: ran.length,
        tokens: distributionOf(ran.map((attempt) => attempt.totalTokens)),
        durationSeconds: distributionOf(ran.map((attempt) => attempt.durationSeconds)),
        failures: [...failures]
          .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
          .slice(0, 32)
          .map(([reason, count]) => ({ reason, count })),
      };
    }),
  );
}
