// `kubectl codingrun logs NAME [-f] [--step N] [-o json]`: the run's transcript, read from the
// ConfigMaps it owns (record/transcript-chunks.ts) with the reader's own RBAC, no Redis. With
// -f it follows: a watch on the run's chunks prints each entry as it lands, a watch on the run
// ends it with the run's outcome, exit 0 when it Succeeded and 1 otherwise.
import { isTerminal, type CodingRun } from '../api/index.ts';
import { TranscriptReader, type TranscriptChunk } from '../record/transcript-chunks.ts';
import type { TranscriptEntry } from '../record/transcript-entry.ts';
import { quotedInline } from './display-escape.ts';
import { RunNotFoundError } from './errors/run-not-found-error.ts';
import type { CliOutput } from './execute-command.ts';
import { entryJson, formatEntry, outcomeJson, outcomeRows, type TranscriptView } from './format-transcript.ts';
import type { Command } from './parse-arguments.ts';
import type { RunClient } from './run-client.ts';
import { wrappedRows } from './terminal-rows.ts';

type LogsCommand = Extract<Command, { command: 'logs' }>;

/** A problem's length on stderr: it quotes a chunk's keys, owners and contents, which anyone who may edit ConfigMaps wrote. */
const PROBLEM_CHARACTERS = 400;

/** What a stream says of itself: process.stdout and process.stderr. */
interface Stream {
  isTTY?: boolean;
  columns?: number;
}

/**
 * How wide the terminal is that will show `logs`: stdout's when it is one, else stderr's:
 * `logs | less` and `logs | grep x` end on the terminal stderr is still on, and `less` wraps a
 * long line at column 0 as the terminal does. With neither a terminal, Infinity (lines left
 * whole): a file or a program reads them, and a cut at a guessed width (80, 100) would still
 * wrap to column 0 on any narrower terminal, so it would promise what it cannot keep.
 */
export function readerColumns(stdout: Stream, stderr: Stream): number {
  for (const stream of [stdout, stderr]) if (stream.isTTY && stream.columns) return stream.columns;
  return Number.POSITIVE_INFINITY;
}

/** Prints entries once each, in key order, as chunks come; problems (unreadable entries, foreign chunks) once each on stderr. */
class TranscriptPrinter {
  private readonly printed = new Set<string>();
  private readonly warned = new Set<string>();
  /** One reader for the whole command: its bounds hold across a watch's events, and it sees every chunk to compare them. */
  private readonly reader: TranscriptReader;
  count = 0;

  constructor(
    private readonly io: CliOutput,
    private readonly command: LogsCommand,
    run: CodingRun,
    private readonly view: TranscriptView,
  ) {
    this.reader = new TranscriptReader(run);
  }

  /** Reads chunks without printing (a list's pages, printed in key order once all are read); true once the reader is full. */
  add(chunks: readonly TranscriptChunk[]): boolean {
    return this.reader.add(chunks).full;
  }

  show(chunks: readonly TranscriptChunk[] = []): void {
    const { entries, problems } = this.reader.add(chunks).result();
    for (const problem of problems) {
      if (this.warned.has(problem)) continue;
      this.warned.add(problem);
      // One line each: a newline in an ownerReference's uid printed lines of its writer's choosing;
      // cut into rows as the record is, so its 400 characters cannot wrap to column 0 either.
      for (const row of wrappedRows(`warning: ${quotedInline(problem, PROBLEM_CHARACTERS)}`, this.view.columns, '  ↳ ')) this.io.err(row);
    }
    for (const entry of entries) {
      if (this.printed.has(entry.key)) continue;
      this.printed.add(entry.key);
      if (this.command.step !== undefined && entry.step !== this.command.step) continue;
      this.print(entry);
    }
  }

  private print(entry: TranscriptEntry): void {
    this.count += 1;
    if (this.command.output === 'json') this.io.out(entryJson(entry));
    else for (const row of formatEntry(entry, this.view)) this.io.out(row);
  }

  outcome(run: CodingRun): void {
    if (this.command.output === 'json') this.io.out(outcomeJson(run));
    else for (const row of outcomeRows(run, this.view)) this.io.out(row);
  }
}

/** `columns`: the reader's terminal width; CliOutput does not carry it, so it is read here unless a test gives it. */
export async function printLogs(
  client: RunClient,
  io: CliOutput,
  namespace: string,
  command: LogsCommand,
  columns: number = readerColumns(process.stdout, process.stderr),
): Promise<number> {
  let run = await client.getRun(namespace, command.name);
  if (!run) throw new RunNotFoundError(namespace, command.name);
  const uid = run.metadata.uid;
  const printer = new TranscriptPrinter(io, command, run, { columns });
  /** Lists the chunks page by page until the reader is full, prints them, and returns the version to watch from. */
  const listed = async () => {
    const list = await client.listTranscript(namespace, uid, (page) => (printer.add(page) ? 'enough' : 'more'));
    printer.show();
    return list.resourceVersion;
  };
  const firstVersion = await listed();
  if (!command.follow) {
    // A finished run's record ends with how it ended, as -f's does (status has it; the chunks need not).
    if (command.step === undefined && isTerminal(run.status?.phase)) printer.outcome(run);
    else if (printer.count === 0)
      io.err(
        command.step === undefined
          ? `codingrun/${command.name} has no transcript entries yet (phase ${run.status?.phase ?? 'Pending'})`
          : `codingrun/${command.name} has no entry for step ${command.step}`,
      );
    return 0;
  }

  // Each watch takes up where the one before ended; the transcript is listed again only when
  // the server says its version is too old or the watch failed.
  let chunksFrom = firstVersion;
  let runFrom = run.metadata.resourceVersion;
  let deleted = false;
  while (!isTerminal(run.status?.phase) && !deleted && !io.signal?.aborted) {
    if (chunksFrom === undefined) chunksFrom = await listed();
    if (runFrom === undefined) {
      // After a failed watch, read the run, as get NAME -w does: a fresh watch of a name that is
      // gone delivers nothing, and logs -f followed a run deleted meanwhile until Ctrl-C.
      const current = await client.getRun(namespace, command.name);
      if (!current || current.metadata.uid !== uid) {
        deleted = true;
        break;
      }
      run = current;
      runFrom = current.metadata.resourceVersion;
      if (isTerminal(run.status?.phase)) break;
    }
    let wake: () => void = () => {};
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
      io.signal?.addEventListener('abort', () => resolve(), { once: true });
    });
    const opened = Date.now();
    const chunks = await client.watchTranscript(namespace, uid, chunksFrom, (chunk) => printer.show([chunk]));
    const runs = await client.watchRuns(namespace, command.name, runFrom, (type, current) => {
      if (current.metadata.uid !== uid) return;
      run = current;
      if (type === 'DELETED') deleted = true;
      if (deleted || isTerminal(current.status?.phase)) wake();
    });
    await Promise.race([woken, chunks.ended, runs.ended]);
    chunks.stop();
    runs.stop();
    chunksFrom = chunks.resumeFrom;
    runFrom = runs.resumeFrom;
    // A watch that ends at once (API server restarting) must not spin: pause before the next.
    if (!isTerminal(run.status?.phase) && !deleted && !io.signal?.aborted && Date.now() - opened < 1000)
      await new Promise((resolve) => setTimeout(resolve, 500));
  }
  // The run's last entries can land after its terminal status reached us (another object,
  // another stream): read them all once more.
  if (!deleted && !io.signal?.aborted) await listed();
  if (deleted) {
    io.err(`codingrun/${command.name} was deleted before it finished`);
    return 1;
  }
  if (io.signal?.aborted) return 1;
  printer.outcome(run);
  return run.status?.phase === 'Succeeded' ? 0 : 1;
}
