// The plain-text report: one line per task × model, then one per model over every task, then
// the failed attempts with why. Every field is shown on one line, escaped (display-escape.ts),
// whether or not stdout is a terminal: a grader's name, or its text as its default label, is any
// text the eval's author wrote, and a newline in one printed a line of their choosing, such as
// "  e-t-m-1: Succeeded (all graders passed)". Pure.
import { escapeForDisplay, quotedInline } from '../display-escape.ts';
import { percent, shortNumber, type EvalReport } from './eval-report-data.ts';

/** Characters of a failure reason shown; of one failed grader with why, twice that. */
const REASON_CHARACTERS = 200;

/** A field on one line: a control character, a newline included, shown (^J), not obeyed. */
const oneLine = (text: string) => escapeForDisplay(text, 'inline').text;

function table(rows: string[][]): string[] {
  const shown = rows.map((row) => row.map(oneLine));
  const widths = shown[0]!.map((_, column) => Math.max(...shown.map((row) => row[column]!.length)));
  return shown.map((row) =>
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
      result.failures.map((failure) => `${quotedInline(failure.reason, REASON_CHARACTERS)}×${failure.count}`).join(', '),
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
    `codingeval/${oneLine(report.name)} ${quotedInline(report.phase, REASON_CHARACTERS)}: ${report.graded}/${report.planned} attempts graded, ${report.passes} passed`,
    '',
    ...table(rows),
    '',
    ...table(overview),
    ...(failed.length > 0
      ? [
          '',
          'Failed attempts:',
          ...failed.map((attempt) => {
            const why = quotedInline(attempt.failure ?? attempt.reason ?? attempt.phase, REASON_CHARACTERS);
            const graders = attempt.failedGraders?.map((grader) => quotedInline(grader, 2 * REASON_CHARACTERS)).join('; ');
            return `  ${oneLine(attempt.run)}: ${why}${graders === undefined ? '' : ` (${graders})`}`;
          }),
        ]
      : []),
  ];
}
