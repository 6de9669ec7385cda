// The processes of this machine (or container) as /proc shows them, read without a `ps`
// binary: the toolbox runs in images that may have none. Linux only; elsewhere the read throws
// and each caller says what it does without it.
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

export interface ProcessEntry {
  pid: number;
  ppid: number;
  /** The process group (field 5 of /proc/PID/stat). */
  pgid: number;
  /** The session (field 6 of /proc/PID/stat): the pid of its session's leader. */
  session: number;
  /** The state letter of /proc/PID/stat: R, S, D, Z, T... */
  state: string;
  /** When it started, in clock ticks since boot (field 22 of /proc/PID/stat). */
  startTicks: number;
  /** How many threads it has (field 20 of /proc/PID/stat). */
  threads: number;
}

/** One /proc/PID/stat line; the command name may hold spaces and parentheses, so fields are read after its last `)`. */
export function parseStat(text: string): ProcessEntry | undefined {
  const close = text.lastIndexOf(')');
  const pid = Number.parseInt(text, 10);
  if (close < 0 || !Number.isInteger(pid)) return undefined;
  const fields = text.slice(close + 2).split(' ');
  // fields[0] is field 3 (state), so field N is fields[N - 3].
  const ppid = Number(fields[1]);
  const pgid = Number(fields[2]);
  const session = Number(fields[3]);
  const threads = Number(fields[17]);
  const startTicks = Number(fields[19]);
  if (
    !fields[0] ||
    !Number.isInteger(ppid) ||
    !Number.isInteger(pgid) ||
    !Number.isInteger(session) ||
    !Number.isInteger(threads) ||
    !Number.isFinite(startTicks)
  ) {
    return undefined;
  }
  return { pid, ppid, pgid, session, state: fields[0], startTicks, threads };
}

/**
 * Whether the process runs, as opposed to being dead and waiting to be reaped. /proc shows the
 * state of the main thread, so a process whose main thread exited while another thread goes on
 * (pthread_exit in main) shows Z too: it is dead only with no thread but that one left.
 */
export function isLive(entry: ProcessEntry): boolean {
  if (entry.state === 'X') return false;
  return entry.state !== 'Z' || entry.threads > 1;
}

/** Every process /proc lists; one that exits while it is read is left out. */
export async function processTable(): Promise<ProcessEntry[]> {
  const names = await readdir('/proc');
  const entries = await Promise.all(
    names.filter((name) => /^[0-9]+$/.test(name)).map((name) => readFile(`/proc/${name}/stat`, 'utf8').then(parseStat, () => undefined)),
  );
  return entries.filter((entry) => entry !== undefined);
}

/**
 * When a process started, in clock ticks since boot; undefined when it cannot be read. Read at
 * once (synchronously) after spawning a child: until the event loop reaps it, even a child that
 * already exited is a zombie whose stat still says when it started.
 */
export function startTicksOf(pid: number): number | undefined {
  return processEntryOf(pid)?.startTicks;
}

/** One process as /proc shows it now (read synchronously); undefined when it is gone or unreadable. */
export function processEntryOf(pid: number | string): ProcessEntry | undefined {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * processTable, read with synchronous calls: /proc answers from memory, and a few thousand tiny
 * reads each cost a trip through libuv's thread pool when async (file-writers.ts, which scans
 * right after, says the same of descriptors). Throws without /proc.
 */
export function processTableNow(): ProcessEntry[] {
  return readdirSync('/proc')
    .filter((name) => /^[0-9]+$/.test(name))
    .map(processEntryOf)
    .filter((entry) => entry !== undefined);
}
