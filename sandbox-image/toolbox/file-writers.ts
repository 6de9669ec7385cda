// Who writes a file: the live processes that hold it open for writing, found by what the file
// is (the device and inode /proc/PID/fd/N leads to), not by its name or by who started them.
// What a command or a job leaves running may have left its process group (`setsid`, `set -m`)
// and may have renamed or deleted its log; it still holds the same open file. Linux only;
// elsewhere the scan answers undefined and each caller says what it does without it.
//
// The descriptors are read with synchronous calls: /proc answers from memory, and a scan is a
// few thousand tiny calls, each of which costs a trip through libuv's thread pool when async
// (measured: five times slower, about 50 ms for a hundred processes).
import { lstatSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { isLive, processTable, type ProcessEntry } from './process-table.ts';

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
): Promise<OpenForWriting[] | undefined> {
  const table = await processTable().catch(() => undefined);
  if (!table) return undefined;
  return table.filter((entry) => entry.pid !== process.pid && isLive(entry)).flatMap((entry) => openedBy(entry, accept));
}

/** The pids of the live processes (not this one) that hold one of the files open for writing. */
export async function writersOf(files: readonly FileIdentity[]): Promise<number[]> {
  if (files.length === 0) return [];
  const opened = await filesOpenForWriting((file) => files.some((each) => sameFile(each, file)));
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

/** The path a descriptor's link names (where the file was, for a deleted one: the kernel's ` (deleted)` mark cut off). */
export function openedPath(descriptor: string): string | undefined {
  try {
    return readlinkSync(descriptor).replace(/ \(deleted\)$/, '');
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

function list(directory: string): string[] {
  try {
    return readdirSync(directory);
  } catch {
    return [];
  }
}
