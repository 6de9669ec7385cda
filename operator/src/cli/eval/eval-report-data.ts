// What `kubectl codingrun eval report` shows, from the eval's status alone: the per task × model
// figures the operator wrote, and per model the same over every task (attempts and passes
// summed, tokens and seconds averaged over the attempts that ran). One shape for the table, the
// JSON and the HTML. Pure.
import type { CodingEval, EvalResult } from '../../api/coding-eval.ts';

export interface ModelOverview {
  model: string;
  attempts: number;
  /** Attempts whose run ran (all but those refused or foreign); the means below are over these. */
  ran: number;
  passes: number;
  passRate: number;
  /** Mean total tokens per attempt that ran, over every task; 0 when none ran. */
  meanTokens: number;
  /** Mean seconds per attempt that ran, over every task; 0 when none ran. */
  meanSeconds: number;
}

export interface EvalReport {
  name: string;
  namespace: string;
  phase: string;
  message: string;
  planned: number;
  graded: number;
  passes: number;
  tasks: string[];
  models: string[];
  results: EvalResult[];
  overview: ModelOverview[];
  attempts: NonNullable<NonNullable<CodingEval['status']>['attempts']>;
}

const round = (value: number, places: number) => Math.round(value * 10 ** places) / 10 ** places;

export function evalReport(evaluation: CodingEval): EvalReport {
  const status = evaluation.status ?? {};
  const results = status.results ?? [];
  const models = evaluation.spec.models.map((model) => model.name);
  const overview = models.map((model) => {
    const cells = results.filter((result) => result.model === model);
    const attempts = cells.reduce((sum, cell) => sum + cell.attempts, 0);
    const passes = cells.reduce((sum, cell) => sum + cell.passes, 0);
    // A cell's tokens and seconds are over the attempts that ran (a status written before `ran` was counted: all of them).
    const ranOf = (cell: EvalResult) => cell.ran ?? cell.attempts;
    const ran = cells.reduce((sum, cell) => sum + ranOf(cell), 0);
    const weighted = (pick: (cell: EvalResult) => number) =>
      ran === 0 ? 0 : cells.reduce((sum, cell) => sum + pick(cell) * ranOf(cell), 0) / ran;
    return {
      model,
      attempts,
      ran,
      passes,
      passRate: attempts === 0 ? 0 : round(passes / attempts, 4),
      meanTokens: round(
        weighted((cell) => cell.tokens.mean),
        1,
      ),
      meanSeconds: round(
        weighted((cell) => cell.durationSeconds.mean),
        1,
      ),
    };
  });
  return {
    name: evaluation.metadata.name,
    namespace: evaluation.metadata.namespace,
    phase: status.phase ?? 'Pending',
    message: status.message ?? '',
    planned: status.planned ?? 0,
    graded: status.graded ?? 0,
    passes: status.passes ?? 0,
    tasks: evaluation.spec.tasks.map((task) => task.name),
    models,
    results,
    overview,
    attempts: status.attempts ?? [],
  };
}

/** 1234 → 1.2k, 2500000 → 2.5M: token counts as people read them. */
export function shortNumber(value: number): string {
  if (value >= 1e6) return `${round(value / 1e6, 1)}M`;
  if (value >= 1e3) return `${round(value / 1e3, 1)}k`;
  return String(round(value, 1));
}

export const percent = (rate: number) => `${Math.round(rate * 100)}%`;
