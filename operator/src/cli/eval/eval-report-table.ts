// The plain-text report: one line per task × model, then one per model over every task, then
// the failed attempts with why. Pure.
import { percent, shortNumber, type EvalReport } from './eval-report-data.ts';

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) =>
    row
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join('  ')
      .trimEnd(),
  );
}

export function evalReportLines(report: EvalReport): string[] {
  const ks = [...new Set(report.results.flatMap((result) => result.passAtK.map((entry) => entry.k)))].sort((a, b) => a - b);
  const rows = [
    ['TASK', 'MODEL', 'PASS', 'RATE', ...ks.map((k) => `PASS@${k}`), 'TOKENS mean/p50/p90', 'SECONDS p50', 'FAILURES'],
    ...report.results.map((result) => [
      result.task,
      result.model,
      `${result.passes}/${result.attempts}`,
      result.attempts === 0 ? '-' : percent(result.passRate),
      ...ks.map((k) => {
        const entry = result.passAtK.find((candidate) => candidate.k === k);
        return entry ? entry.value.toFixed(2) : '-';
      }),
      `${shortNumber(result.tokens.mean)}/${shortNumber(result.tokens.p50)}/${shortNumber(result.tokens.p90)}`,
      result.durationSeconds.p50.toFixed(1),
      result.failures.map((failure) => `${failure.reason}×${failure.count}`).join(', '),
    ]),
  ];
  const overview = [
    ['MODEL', 'PASS', 'RATE', 'TOKENS/attempt', 'SECONDS/attempt'],
    ...report.overview.map((model) => [
      model.model,
      `${model.passes}/${model.attempts}`,
      model.attempts === 0 ? '-' : percent(model.passRate),
      shortNumber(model.meanTokens),
      String(model.meanSeconds),
    ]),
  ];
  const failed = report.attempts.filter((attempt) => !attempt.passed);
  return [
    `codingeval/${report.name} ${report.phase}: ${report.graded}/${report.planned} attempts graded, ${report.passes} passed`,
    '',
    ...table(rows),
    '',
    ...table(overview),
    ...(failed.length > 0
      ? [
          '',
          'Failed attempts:',
          ...failed.map(
            (attempt) =>
              `  ${attempt.run}: ${attempt.failure ?? attempt.reason ?? attempt.phase}${attempt.failedGraders ? ` (${attempt.failedGraders.join('; ')})` : ''}`,
          ),
        ]
      : []),
  ];
}
