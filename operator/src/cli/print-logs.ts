// `kubectl codingrun logs NAME [-f] [--step N] [-o json]`: the run's transcript, read from the
// ConfigMaps it owns (record/transcript-chunks.ts) with the reader's own RBAC, no Redis. With
// -f it follows: a watch on the run's chunks prints each entry as it lands (the latest step's
// held back until it settles, FOLLOW_SETTLE_MS), a watch on the run ends it with the run's
// outcome, exit 0 when it Succeeded and 1 otherwise.
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

/**
 * How long `logs -f` waits for the transcript to be quiet before it prints the latest step's
 * entries. A step's record trails its hand-over (workers/trailing-record.ts) and one write goes
 * to each chunk it touches, so step 17 (opening chunk 1) can land before step 16 (chunk 0), and
 * a terminal cannot take back a line: printed as they came, they read 17, 16. The entries of
 * steps before the latest one seen are printed at once; the latest step's wait for a later
 * step, the run's end, or this much quiet (the writes on their way land one API round trip
 * after the step, so a run waiting for an approval shows its step a second later).
 */
export const FOLLOW_SETTLE_MS = 1000;

/**
 * Prints entries once each, in key order, as chunks come; problems (unreadable entries, foreign
 * chunks) once each on stderr. An entry that lands after one that sorts after it was printed
 * (later than FOLLOW_SETTLE_MS, or a chunk someone else wrote) is printed where it lands.
 */
class TranscriptPrinter {
  private readonly printed = new Set<string>();
  private readonly warned = new Set<string>();
  /** One reader for the whole command: its bounds hold across a watch's events, and it sees every chunk to compare them. */
  private readonly reader: TranscriptReader;
  /** Prints the held entries once the transcript has been quiet FOLLOW_SETTLE_MS (follow only). */
  private settle: ReturnType<typeof setTimeout> | undefined;
  /** Keys of the entries read so far: an event that adds none is not news (follow). */
  private readonly known = new Set<string>();
  count = 0;

  constructor(
    private readonly io: CliOutput,
    private readonly command: LogsCommand,
    run: CodingRun,
    private readonly view: TranscriptView,
    private readonly settleMs: number,
  ) {
    this.reader = new TranscriptReader(run);
  }

  /** Reads chunks without printing (a list's pages, printed in key order once all are read); true once the reader is full. */
  add(chunks: readonly TranscriptChunk[]): boolean {
    return this.reader.add(chunks).full;
  }

  /**
   * Reads chunks and prints what is known to be in its place: the entries of steps before the
   * latest one seen. The rest wait for a later step, `show`, or FOLLOW_SETTLE_MS of quiet.
   */
  follow(chunks: readonly TranscriptChunk[] = []): void {
    const { entries } = this.reader.add(chunks).result();
    const latest = entries.reduce((highest, entry) => Math.max(highest, entry.step), 0);
    this.show([], (entry) => entry.step < latest);
    // Quiet means no new entries, not no events: a ConfigMap labelled as the run's chunk but not
    // its own, or its own touched without a new entry, comes as often as anyone who may edit
    // ConfigMaps in the namespace likes, and re-arming on it held the latest step back until the
    // run ended (often the step asking for approval). A later step is a new entry too.
    let news = false;
    for (const entry of entries) {
      if (this.known.has(entry.key)) continue;
      this.known.add(entry.key);
      news = true;
    }
    if (!news) return;
    clearTimeout(this.settle);
    this.settle = setTimeout(() => this.show(), this.settleMs);
    // A quiet transcript must not keep the process alive once the command is done.
    this.settle.unref?.();
  }

  /** No more held entries to print later: the command prints the rest itself (show) or gives up. */
  stop(): void {
    clearTimeout(this.settle);
  }

  /** Reads chunks and prints every entry not printed yet (up to the first that `ready` holds back), in key order. */
  show(chunks: readonly TranscriptChunk[] = [], ready: (entry: TranscriptEntry) => boolean = () => true): void {
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
      // Entries are in key order and the held ones (the latest step's) sort last.
      if (!ready(entry)) break;
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

/**
 * `columns`: the reader's terminal width; CliOutput does not carry it, so it is read here unless
 * a test gives it. `settleMs`: FOLLOW_SETTLE_MS unless a test gives it.
 */
export async function printLogs(
  client: RunClient,
  io: CliOutput,
  namespace: string,
  command: LogsCommand,
  columns: number = readerColumns(process.stdout, process.stderr),
  settleMs: number = FOLLOW_SETTLE_MS,
): Promise<number> {
  let run = await client.getRun(namespace, command.name);
  if (!run) throw new RunNotFoundError(namespace, command.name);
  const uid = run.metadata.uid;
  const printer = new TranscriptPrinter(io, command, run, { columns, run: { name: command.name, namespace } }, settleMs);
  /**
   * Lists the chunks page by page until the reader is full, prints them (while following, all
   * but the latest step's: follow), and returns the version to watch from.
   */
  const listed = async (following: boolean) => {
    const list = await client.listTranscript(namespace, uid, (page) => (printer.add(page) ? 'enough' : 'more'));
    if (following) printer.follow();
    else printer.show();
    return list.resourceVersion;
  };
  const firstVersion = await listed(command.follow === true);
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
    if (chunksFrom === undefined) chunksFrom = await listed(true);
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
    const chunks = await client.watchTranscript(namespace, uid, chunksFrom, (chunk) => printer.follow([chunk]));
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
  // another stream): read them all once more, and print what was held back.
  printer.stop();
  if (!deleted && !io.signal?.aborted) await listed(false);
  else printer.show();
  if (deleted) {
    io.err(`codingrun/${command.name} was deleted before it finished`);
    return 1;
  }
  if (io.signal?.aborted) return 1;
  printer.outcome(run);
  return run.status?.phase === 'Succeeded' ? 0 : 1;
}
