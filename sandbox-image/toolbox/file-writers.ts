// Who writes a file: the live processes that hold it open for writing, found by what the file
// is (the device and inode /proc/PID/fd/N leads to), not by its name or by who started them.
// What a command or a job leaves running may have left its process group (`setsid`, `set -m`)
// and may have renamed or deleted its log; it still holds the same open file. Linux only;
// elsewhere the scan answers undefined and each caller says what it does without it.
//
// The descriptors are read with synchronous calls: /proc answers from memory, and a scan is a
// few thousand tiny calls, each of which costs a trip through libuv's thread pool when async
// (measured: five times slower, about 50 ms for a hundred processes).
import { lstatSync, readdirSync, statSync } from 'node:fs';
import { isLive, processEntryOf, processTableNow, type ProcessEntry } from './process-table.ts';

/** A file as the kernel knows it: a log the command replaced or deleted is still the same open file. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

/** A regular file a process holds open for writing. */
export interface OpenForWriting extends FileIdentity {
  pid: number;
  /** Its size now. */
  size: bigint;
  /** The descriptor under /proc (its link names the file's path, ` (deleted)` after it when deleted). */
  descriptor: string;
}

export function sameFile(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

/**
 * Every regular file a live process other than this one holds open for writing and `accept`
 * takes; undefined without /proc. A process that forks its successor and exits can be missed
 * by one scan (the scan is not atomic), so an empty answer is a hint, never proof.
 */
export async function filesOpenForWriting(
  accept: (file: FileIdentity & { size: bigint }) => boolean,
  scope: WriterScope = {},
): Promise<OpenForWriting[] | undefined> {
  const table = scope.among ? scope.among.map(processEntryOf).filter((entry) => entry !== undefined) : processTableOrNothing();
  if (!table) return undefined;
  const { startedSince } = scope;
  return table
    .filter((entry) => entry.pid !== process.pid && isLive(entry) && (startedSince === undefined || entry.startTicks >= startedSince))
    .flatMap((entry) => openedBy(entry, accept));
}

/** Which processes a scan looks at. */
export interface WriterScope {
  /**
   * Only those started at or after this many clock ticks since boot (field 22 of stat). Every
   * process a command starts is younger than the command, so the holders of its new logs are
   * found without reading the descriptors of everything older (which is most of the sandbox).
   */
  startedSince?: number;
  /** Only these (the writers an earlier scan found, asked again), not every process. */
  among?: readonly number[];
}

/** The pids of the live processes (not this one) that hold one of the files open for writing. */
export async function writersOf(files: readonly FileIdentity[], scope: WriterScope = {}): Promise<number[]> {
  if (files.length === 0 || scope.among?.length === 0) return [];
  const opened = await filesOpenForWriting((file) => files.some((each) => sameFile(each, file)), scope);
  return [...new Set((opened ?? []).map((file) => file.pid))];
}

/** The file at a path, when it is a regular file (not followed: a symlink planted there is no log). */
export function regularFileAt(file: string): FileIdentity | undefined {
  try {
    const stats = lstatSync(file, { bigint: true });
    return stats.isFile() ? { dev: stats.dev, ino: stats.ino } : undefined;
  } catch {
    return undefined;
  }
}

export function signalProcesses(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Gone already.
    }
  }
}

function openedBy(entry: ProcessEntry, accept: (file: FileIdentity & { size: bigint }) => boolean): OpenForWriting[] {
  // A process whose main thread exited lists no descriptors at /proc/PID/fd (that is the main
  // thread's view): its other threads hold them, under task/.
  const directories =
    entry.state === 'Z' ? list(`/proc/${entry.pid}/task`).map((task) => `/proc/${entry.pid}/task/${task}/fd`) : [`/proc/${entry.pid}/fd`];
  const found: OpenForWriting[] = [];
  for (const directory of directories) {
    for (const name of list(directory)) {
      const descriptor = `${directory}/${name}`;
      try {
        // stat follows the link to the open file, even a deleted one; the link's own mode is
        // the descriptor's access (w when opened for writing).
        const opened = statSync(descriptor, { bigint: true });
        if (!opened.isFile() || !accept({ dev: opened.dev, ino: opened.ino, size: opened.size })) continue;
        if ((lstatSync(descriptor).mode & 0o200) === 0) continue;
        if (found.some((file) => sameFile(file, opened))) continue;
        found.push({ pid: entry.pid, dev: opened.dev, ino: opened.ino, size: opened.size, descriptor });
      } catch {
        // Closed meanwhile, or the process is gone.
      }
    }
  }
  return found;
}

function processTableOrNothing(): ProcessEntry[] | undefined {
  try {
    return processTableNow();
  } catch {
    return undefined;
  }
}

function list(directory: string): string[] {
  try {
    return readdirSync(directory);
  } catch {
    return [];
  }
}
