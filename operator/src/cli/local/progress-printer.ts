// What a local run prints while it works. Progress goes to stderr, so stdout carries only
// the diff (`run ... --local > change.diff`): one line per Event the run records — the
// story `kubectl describe codingrun` tells — with the seconds since the start (the
// pod-lifecycle Events say what happens locally), and each step of the transcript as
// `kubectl codingrun logs -f` shows it. At the end, one line with the outcome and the
// totals. Pure formatting plus a line writer.
import type { CodingRun } from '../../api/index.ts';
import type { TranscriptEntry } from '../../record/transcript-entry.ts';
import { escapeForDisplay } from '../display-escape.ts';
import { formatTokens } from '../format-runs.ts';
import { formatEntry } from '../format-transcript.ts';

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

export function progressLine(elapsedMs: number, event: ProgressEvent): string {
  const reason = event.reason ?? 'Event';
  const message = (LOCAL_WORDING[reason] ?? event.message ?? '').replace(/\s+/g, ' ').trim();
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
 * model's choosing (a fake `codingrun/demo Succeeded`) among the progress.
 */
export function summaryLines(summary: string): string[] {
  const [first, ...rest] = escapeForDisplay(summary.trimEnd(), 'lines').text.split(/\r?\n/);
  return [`summary: ${first}`, ...rest.map((line) => `  | ${line}`)];
}

export class ProgressPrinter {
  constructor(
    private readonly write: (line: string) => void,
    private readonly startedAt: number,
    private readonly now: () => number = Date.now,
  ) {}

  event(event: ProgressEvent): void {
    this.write(progressLine(this.now() - this.startedAt, event));
  }

  /** A transcript entry, in the lines `kubectl codingrun logs` prints. */
  entry(entry: TranscriptEntry): void {
    for (const line of formatEntry(entry)) this.write(line);
  }

  note(message: string): void {
    this.event({ reason: 'Local', message });
  }

  finished(run: CodingRun): void {
    this.write(summaryLine(run, this.now() - this.startedAt));
    // A run stopped by a budget has its stop message as summary: printed once is enough.
    const summary = run.status?.result?.summary;
    if (summary && summary !== run.status?.message) for (const line of summaryLines(summary)) this.write(line);
  }
}
