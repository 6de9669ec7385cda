// What a foreground bash command leaves running when its shell exits (`npm start &`,
// `tail -f log &`, `nohup x &`, `setsid server &`) and that still holds the command's output logs
// open for writing, in its process group or not (file-writers.ts finds them by the open file). They are
// left running: a server with its stdout redirected but its stderr still the call's, or the
// reader of a process substitution (`> >(sed ...)`) finishing just after the shell, is honest use
// that a kill would break. While the call waits for them the cap still holds: one whose log
// passes it (`yes &`) is killed, alone, as the command would have been. But the call's result is
// final once it answers, and nothing watches the logs after that (a `call` process exits right
// away), so what they write then is not shown, and capped only when a later command runs: each
// scan also kills a process writing an earlier command's log that has passed the cap. The result
// says so, and points to background jobs, which have a watchdog, bash_output and bash_kill.
import { stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { type FileIdentity, filesOpenForWriting, openedPath, regularFileAt, sameFile, signalProcesses } from './file-writers.ts';

/** One of the command's logs: where it is, and which file it is. */
export interface CommandLog extends FileIdentity {
  path: string;
}

export interface HolderWait {
  /** Holders that wrote nothing to the logs for this long are taken to be staying. */
  quietMs: number;
  /** And holders still writing after this long, too (a chatty server). */
  maxMs: number;
  /** Holders of a log larger than this are killed (SIGKILL) while the call waits. */
  capBytes: number;
  /** Where every command's logs are (its real path): writers of an earlier one past the cap are killed too. */
  logDirectory: string;
}

export interface OutputHolders {
  /** Left running, still holding a log open. */
  running: number;
  /** Killed because a log they held passed the cap. */
  stoppedOverCap: number;
  /** Killed because an earlier command's log they held passed the cap. */
  earlierStoppedOverCap: number;
}

/** A live process holding a log open for writing, and the size of the largest log it holds. */
interface Holder {
  pid: number;
  heldBytes: bigint;
}

const POLL_MS = 20;

/**
 * How many live processes hold one of the logs open for writing, once those that were still
 * writing and then finished have finished (a process substitution's reader writing its last
 * lines after the shell exited), and how many were killed meanwhile because a log they held
 * passed the cap. The size is the open file's, so a log the command deleted is capped too.
 * None without /proc (not Linux), where it cannot be told.
 */
export async function outputHoldersAfter(logs: readonly CommandLog[], wait: HolderWait): Promise<OutputHolders> {
  const deadline = Date.now() + wait.maxMs;
  const capBytes = BigInt(wait.capBytes);
  const stopped = new Set<number>();
  const earlierStopped = new Set<number>();
  let size = await writtenBytes(logs);
  let quietSince = Date.now();
  for (;;) {
    const scan = await scanWriters(logs, wait.logDirectory, capBytes);
    const earlier = scan.earlier.filter((log) => !earlierStopped.has(log.pid));
    await stopEarlierWriters(earlier, capBytes);
    for (const log of earlier) earlierStopped.add(log.pid);
    const holders = scan.holders.filter((holder) => !stopped.has(holder.pid) && !earlierStopped.has(holder.pid));
    const overCap = holders.filter((holder) => holder.heldBytes > capBytes).map((holder) => holder.pid);
    signalProcesses(overCap, 'SIGKILL');
    for (const pid of overCap) stopped.add(pid);
    const running = holders.length - overCap.length;
    const now = Date.now();
    if (running === 0 || now >= deadline || now - quietSince >= wait.quietMs) {
      return { running, stoppedOverCap: stopped.size, earlierStoppedOverCap: earlierStopped.size };
    }
    await delay(POLL_MS);
    const next = await writtenBytes(logs);
    if (next !== size) {
      size = next;
      quietSince = Date.now();
    }
  }
}

/** The size of the logs still at their paths; one replaced by another file counts as empty. */
async function writtenBytes(logs: readonly CommandLog[]): Promise<bigint> {
  const sizes = await Promise.all(
    logs.map(async (log) => {
      const stats = await stat(log.path, { bigint: true }).catch(() => undefined);
      return stats && sameFile(stats, log) ? stats.size : 0n;
    }),
  );
  return sizes.reduce((sum, each) => sum + each, 0n);
}

interface EarlierLog extends FileIdentity {
  pid: number;
  path: string;
}

/**
 * The holders of the command's logs, and the writers of an earlier command's log (a file in the
 * log directory) that has passed the cap. One scan for both: it reads every descriptor anyway.
 */
async function scanWriters(
  logs: readonly CommandLog[],
  logDirectory: string,
  capBytes: bigint,
): Promise<{ holders: Holder[]; earlier: EarlierLog[] }> {
  const opened = (await filesOpenForWriting((file) => file.size > capBytes || logs.some((log) => sameFile(log, file)))) ?? [];
  const held = new Map<number, bigint>();
  const earlier: EarlierLog[] = [];
  for (const file of opened) {
    if (logs.some((log) => sameFile(log, file))) {
      const largest = held.get(file.pid);
      if (largest === undefined || file.size > largest) held.set(file.pid, file.size);
      continue;
    }
    const where = openedPath(file.descriptor);
    if (where !== undefined && path.dirname(where) === logDirectory) {
      earlier.push({ pid: file.pid, dev: file.dev, ino: file.ino, path: where });
    }
  }
  return { holders: [...held].map(([pid, heldBytes]) => ({ pid, heldBytes })), earlier };
}

/** Kills the writers of an earlier command's log past the cap, then cuts the log back to the cap (unless deleted or replaced). */
async function stopEarlierWriters(earlier: readonly EarlierLog[], capBytes: bigint): Promise<void> {
  signalProcesses(
    earlier.map((log) => log.pid),
    'SIGKILL',
  );
  for (const log of earlier) {
    const now = regularFileAt(log.path);
    if (now && sameFile(now, log)) await truncate(log.path, Number(capBytes)).catch(() => undefined);
  }
}
