// The figures per task × model from the graded attempts: attempts, passes, pass rate, pass@k,
// tokens and duration (mean, p50, p90) and failures by reason. Pure; the status and the report
// show exactly these.
import type { AttemptStatus, CodingEvalSpec, EvalResult } from '../api/coding-eval.ts';
import { distributionOf } from './distribution.ts';
import { passAtK } from './pass-at-k.ts';

const round = (value: number) => Math.round(value * 10_000) / 10_000;

/** The failure reason an attempt counts under: the run's reason, else its first failed grader. */
export const failureReasonOf = (attempt: AttemptStatus): string | undefined =>
  attempt.passed ? undefined : (attempt.failure ?? attempt.reason ?? attempt.phase);

export function summarise(spec: Pick<CodingEvalSpec, 'tasks' | 'models' | 'passAtK'>, attempts: readonly AttemptStatus[]): EvalResult[] {
  return spec.tasks.flatMap((task) =>
    spec.models.map((model) => {
      const cell = attempts.filter((attempt) => attempt.task === task.name && attempt.model === model.name);
      const n = cell.length;
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
        tokens: distributionOf(cell.map((attempt) => attempt.totalTokens)),
        durationSeconds: distributionOf(cell.map((attempt) => attempt.durationSeconds)),
        failures: [...failures]
          .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
          .slice(0, 32)
          .map(([reason, count]) => ({ reason, count })),
      };
    }),
  );
}
