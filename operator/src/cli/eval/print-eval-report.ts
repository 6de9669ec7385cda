// `kubectl codingrun eval report NAME [-o json] [--html FILE]`: the eval's figures from its
// status (written by the operator; no run is read again), as a table, as JSON for CI, and as a
// self-contained HTML file with charts.
import { writeFile } from 'node:fs/promises';
import { EvalNotFoundError } from '../errors/eval-not-found-error.ts';
import { CliError } from '../errors/cli-error.ts';
import { escapedJson } from '../escaped-json.ts';
import type { CliOutput } from '../execute-command.ts';
import type { Command } from '../parse-arguments.ts';
import type { RunClient } from '../run-client.ts';
import { evalReport } from './eval-report-data.ts';
import { evalReportHtml } from './eval-report-html.ts';
import { evalReportLines } from './eval-report-table.ts';

type EvalCommand = Extract<Command, { command: 'eval' }>;

export async function printEvalReport(client: RunClient, io: CliOutput, namespace: string, command: EvalCommand): Promise<number> {
  const evaluation = await client.getEval(namespace, command.name);
  if (!evaluation) throw new EvalNotFoundError(namespace, command.name);
  const report = evalReport(evaluation);
  if (command.html) {
    try {
      await writeFile(command.html, evalReportHtml(report, io.now()));
    } catch (error) {
      throw new CliError(`cannot write ${command.html}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (command.output === 'json') io.out(escapedJson(report, 2));
  else for (const line of evalReportLines(report)) io.out(line);
  if (command.html) io.err(`wrote ${command.html}`);
  return 0;
}
