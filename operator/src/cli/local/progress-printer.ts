// What a local run prints while it works. Progress goes to stderr, so stdout carries only
// the diff (`run ... --local > change.diff`): one line per Event the run records — the
// story `kubectl describe codingrun` tells — with the seconds since the start (the
// pod-lifecycle Events say what happens locally), and each step of the transcript as
// `kubectl codingrun logs -f` shows it. At the end, one line with the outcome and the
// totals. On a terminal every line is cut into rows narrower than it, as `logs` cuts them
// (format-transcript.ts): a line of the model's the terminal wrapped would start a row at column
// 0, where it could pass for one of the plugin's. Pure formatting plus a line writer.
import type { CodingRun } from '../../api/index.ts';
import type { TranscriptEntry } from '../../record/transcript-entry.ts';
import { collapsedBlanks, escapeForDisplay } from '../display-escape.ts';
import { formatTokens } from '../format-runs.ts';
import { formatEntry, proseLines, UNCUT, type TranscriptView } from '../format-transcript.ts';
import { wrappedRows } from '../terminal-rows.ts';

export interface ProgressEvent {
  type?: string;
  reason?: string;
  message?: string;
}

/** There is no pod in local mode; these Events say what happens instead. */
const LOCAL_WORDING: Record<string, string> = {
  Provisioning: 'Creating the local sandbox: the toolbox as a process on this machine, in a temporary directory',
  SandboxReady: 'The local sandbox is ready; starting the agent',
};

const REASON_WIDTH = 16;

/**
 * One Event as a line, in the form it is printed in: its message may quote the repository (a
 * setup command's output) or the model, and wrappedRows measures it, so it is escaped here. Left
 * to stderr's escaping, a U+200B counted one cell became `<U+200B>`, eight, after it was cut, and
 * the terminal wrapped the row to column 0 again. The escaped text is printable ASCII where it
 * was escaped, so stderr's escaping leaves it as it is.
 */
export function progressLine(elapsedMs: number, event: ProgressEvent): string {
  const reason = escapeForDisplay(collapsedBlanks(event.reason ?? 'Event'), 'inline').text;
  const message = escapeForDisplay(collapsedBlanks(LOCAL_WORDING[reason] ?? event.message ?? ''), 'inline').text;
  const marker = event.type === 'Warning' ? '! ' : '  ';
  return `${(elapsedMs / 1000).toFixed(1).padStart(6)}s ${marker}${reason.padEnd(REASON_WIDTH)} ${message}`;
}

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;

/** `codingrun/demo Succeeded in 3.2s: 4 steps, 3 tool calls, 6307 tokens; 1 file changed, +1 -1`. */
export function summaryLine(run: CodingRun, elapsedMs: number): string {
  const status = run.status ?? {};
  const result = status.result;
  const totals = `${plural(status.steps ?? 0, 'step')}, ${plural(status.toolCalls ?? 0, 'tool call')}, ${formatTokens(run)} tokens`;
  const changes = result ? `; ${plural(result.filesChanged, 'file')} changed, +${result.insertions} -${result.deletions}` : '';
  return `codingrun/${run.metadata.name} ${status.phase ?? 'Pending'} in ${(elapsedMs / 1000).toFixed(1)}s: ${totals}${changes}`;
}

/**
 * The model's final summary, one written line per line of it, each after the first marked
 * `  | ` as `logs` marks the model's text: written whole, a newline in it printed a line of the
 * model's choosing (a fake `codingrun/demo Succeeded`) among the progress. Shown as `logs` shows
 * prose (proseLines: tabs as ^I, blank runs counted), but whole: the API bounds a summary to 16
 * KiB, and the progress is the only place a local run shows it.
 */
export function summaryLines(summary: string, view: TranscriptView = UNCUT): string[] {
  const [first, ...rest] = proseLines(summary);
  return [`summary: ${first}`, ...rest.map((line) => `  | ${line}`)].flatMap((line) => wrappedRows(line, view.columns, '  | '));
}

export class ProgressPrinter {
  constructor(
    private readonly write: (line: string) => void,
    private readonly startedAt: number,
    private readonly now: () => number = Date.now,
    /** The terminal progress goes to (stderr), or none: lines whole. */
    private readonly view: TranscriptView = UNCUT,
  ) {}

  event(event: ProgressEvent): void {
    // An Event's message may quote the model (an approval's input, a failure's text).
    for (const row of wrappedRows(progressLine(this.now() - this.startedAt, event), this.view.columns, '  ↳ ')) this.write(row);
  }

  /** A transcript entry, in the rows `kubectl codingrun logs` prints. */
  entry(entry: TranscriptEntry): void {
    for (const line of formatEntry(entry, this.view)) this.write(line);
  }

  note(message: string): void {
    this.event({ reason: 'Local', message });
  }

  finished(run: CodingRun): void {
    for (const row of wrappedRows(summaryLine(run, this.now() - this.startedAt), this.view.columns, '  ↳ ')) this.write(row);
    // A run stopped by a budget has its stop message as summary: printed once is enough.
    const summary = run.status?.result?.summary;
    if (summary && summary !== run.status?.message) for (const line of summaryLines(summary, this.view)) this.write(line);
  }
}
