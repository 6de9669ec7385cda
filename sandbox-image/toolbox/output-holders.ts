// What a foreground bash command leaves running when its shell exits (`npm start &`,
// `tail -f log &`, `nohup x &`, `setsid server &`) and that still holds the command's output logs
// open for writing, in its process group or not (file-writers.ts finds them by the open file). They are
// left running: a server with its stdout redirected but its stderr still the call's, or the
// reader of a process substitution (`> >(sed ...)`) finishing just after the shell, is honest use
// that a kill would break. While the call waits for them the cap still holds: one whose log
// passes it (`yes &`) is killed, alone, as the command would have been. But the call's result is
// final once it answers, and nothing watches the logs after that (a `call` process exits right
// away), so what they write then is not shown, and capped only when a later command runs: each
// call also kills every process holding an earlier command's log open for writing once that log
// has passed the cap (a quiet holder too: a loop whose children write in bursts looks idle
// between them, and a daemon that only inherited the log goes with it). The result says so, and
// points to background jobs, which have a watchdog, bash_output and bash_kill.
import { lstat, readdir, stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { type FileIdentity, filesOpenForWriting, regularFileAt, sameFile, signalProcesses } from './file-writers.ts';

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
  /**
   * When the command's shell started, in clock ticks since boot: what holds its logs started then
   * or later, so older processes are not looked at for them. Undefined when unknown: all are.
   */
  commandStartTicks?: number;
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
    const scan = await scanWriters(logs, wait, capBytes);
    for (const pid of await stopEarlierWriters(scan.earlier, capBytes, [...stopped, ...earlierStopped])) earlierStopped.add(pid);
    const holders = scan.holders.filter((holder) => !stopped.has(holder.pid) && !earlierStopped.has(holder.pid));
    const overCap = holders.filter((holder) => holder.heldBytes > capBytes).map((holder) => holder.pid);
    signalProcesses(overCap, 'SIGKILL');
    for (const pid of overCap) stopped.add(pid);
    const running = holders.length - overCap.length;
    // Read after the scan, not only after the pause: a scan slower than quietMs (a loaded
    // machine) must not make a holder that wrote meanwhile look quiet.
    const next = await writtenBytes(logs);
    if (next !== size) {
      size = next;
      quietSince = Date.now();
    }
    const now = Date.now();
    if (running === 0 || now >= deadline || now - quietSince >= wait.quietMs) {
      return { running, stoppedOverCap: stopped.size, earlierStoppedOverCap: earlierStopped.size };
    }
    await delay(POLL_MS);
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

/** An earlier command's log past the cap, and the processes found holding it open for writing. */
interface EarlierLog extends FileIdentity {
  path: string;
  writers: number[];
}

/**
 * The holders of the command's logs, and the writers of an earlier command's log (a file in the
 * log directory) that has passed the cap. Most calls leave nothing behind and find no earlier log
 * past the cap, so the scan reads as few descriptors as it can: for the command's logs only those
 * of processes started since the command; every process's only when an earlier log is past the
 * cap (a size read first, without reading any descriptor). One scan when both are needed.
 */
async function scanWriters(
  logs: readonly CommandLog[],
  wait: HolderWait,
  capBytes: bigint,
): Promise<{ holders: Holder[]; earlier: EarlierLog[] }> {
  const earlier = await earlierLogsOverCap(logs, wait.logDirectory, capBytes);
  const scope = earlier.length > 0 ? {} : { startedSince: wait.commandStartTicks };
  const opened =
    (await filesOpenForWriting((file) => logs.some((log) => sameFile(log, file)) || earlier.some((log) => sameFile(log, file)), scope)) ??
    [];
  const held = new Map<number, bigint>();
  for (const file of opened) {
    if (logs.some((log) => sameFile(log, file))) {
      const largest = held.get(file.pid);
      if (largest === undefined || file.size > largest) held.set(file.pid, file.size);
      continue;
    }
    earlier.find((log) => sameFile(log, file))?.writers.push(file.pid);
  }
  return { holders: [...held].map(([pid, heldBytes]) => ({ pid, heldBytes })), earlier };
}

/**
 * The files in the log directory, other than the command's own logs, larger than the cap: at most
 * the 400 logs pruning keeps, each a size read. Read at their path (a symlink there is no log): a
 * log an earlier command deleted or moved away is not found, and not capped after its call answered.
 */
async function earlierLogsOverCap(logs: readonly CommandLog[], logDirectory: string, capBytes: bigint): Promise<EarlierLog[]> {
  const names = await readdir(logDirectory).catch(() => [] as string[]);
  const found = await Promise.all(
    names.map(async (name): Promise<EarlierLog | undefined> => {
      const where = path.join(logDirectory, name);
      const stats = await lstat(where, { bigint: true }).catch(() => undefined);
      if (!stats?.isFile() || stats.size <= capBytes || logs.some((log) => sameFile(log, stats))) return undefined;
      return { path: where, dev: stats.dev, ino: stats.ino, writers: [] };
    }),
  );
  return found.filter((log) => log !== undefined);
}

/**
 * Kills every process holding an earlier command's log past the cap open for writing, then cuts
 * the log back to the cap (unless deleted or replaced meanwhile). Every holder, not only those
 * seen writing: a loop whose children write in bursts (`while :; do make; sleep 5; done &`)
 * never writes itself, and a write count (wchar) counts writes anywhere, so a server beside the
 * loud one would be told apart by luck. A daemon that only inherited the log goes too: send a
 * server's output elsewhere (`server > server.log 2>&1 &`). Answers the pids killed.
 */
async function stopEarlierWriters(earlier: readonly EarlierLog[], capBytes: bigint, alreadyStopped: readonly number[]): Promise<number[]> {
  const writing = [...new Set(earlier.flatMap((log) => log.writers))].filter((pid) => !alreadyStopped.includes(pid));
  signalProcesses(writing, 'SIGKILL');
  for (const log of earlier) {
    const now = regularFileAt(log.path);
    if (now && sameFile(now, log)) await truncate(log.path, Number(capBytes)).catch(() => undefined);
  }
  return writing;
}
