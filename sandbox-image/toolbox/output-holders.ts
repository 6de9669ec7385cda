// What a foreground bash command leaves running when its shell exits (`npm start &`,
// `tail -f log &`, `nohup x &`) and that still holds the command's output logs open. They are
// left running: a server with its stdout redirected but its stderr still the call's, or the
// reader of a process substitution (`> >(sed ...)`) finishing just after the shell, is honest use
// that a kill would break. While the call waits for them the cap still holds: one whose log
// passes it (`yes &`) is killed, alone, as the command would have been. But the call's result is
// final once it answers, and nothing watches the logs after that (a `call` process exits right
// away), so what they write then is neither capped nor shown: the result says so, and points to
// background jobs, which have a watchdog, bash_output and bash_kill.
import { readdir, stat } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { liveGroupMembers } from './process-group.ts';

/** A file as the kernel knows it: a log the command replaced or deleted is still the same open file. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

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
}

export interface OutputHolders {
  /** Left running, still holding a log open. */
  running: number;
  /** Killed because a log they held passed the cap. */
  stoppedOverCap: number;
}

/** A live process of the group holding a log open, and the size of the largest log it holds. */
interface Holder {
  pid: number;
  heldBytes: bigint;
}

const POLL_MS = 20;

/**
 * How many live processes of the group hold one of the logs open, once those that were still
 * writing and then finished have finished (a process substitution's reader writing its last
 * lines after the shell exited), and how many were killed meanwhile because a log they held
 * passed the cap. The size is the open file's, so a log the command deleted is capped too.
 * None without /proc (not Linux), where it cannot be told.
 */
export async function outputHoldersAfter(pgid: number, logs: readonly CommandLog[], wait: HolderWait): Promise<OutputHolders> {
  const deadline = Date.now() + wait.maxMs;
  const capBytes = BigInt(wait.capBytes);
  const stopped = new Set<number>();
  let size = await writtenBytes(logs);
  let quietSince = Date.now();
  for (;;) {
    const holders = (await outputHolders(pgid, logs)).filter((holder) => !stopped.has(holder.pid));
    for (const holder of holders.filter((each) => each.heldBytes > capBytes)) {
      stopped.add(holder.pid);
      try {
        process.kill(holder.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    const running = holders.filter((holder) => !stopped.has(holder.pid)).length;
    const now = Date.now();
    if (running === 0 || now >= deadline || now - quietSince >= wait.quietMs) return { running, stoppedOverCap: stopped.size };
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
      return stats && stats.dev === log.dev && stats.ino === log.ino ? stats.size : 0n;
    }),
  );
  return sizes.reduce((sum, each) => sum + each, 0n);
}

async function outputHolders(pgid: number, files: readonly FileIdentity[]): Promise<Holder[]> {
  const members = (await liveGroupMembers(pgid)) ?? [];
  const held = await Promise.all(members.map((pid) => largestHeld(pid, files)));
  return members.flatMap((pid, index) => {
    const heldBytes = held[index];
    return heldBytes === undefined ? [] : [{ pid, heldBytes }];
  });
}

/** The size of the largest of the files the process holds open; undefined when it holds none. */
async function largestHeld(pid: number, files: readonly FileIdentity[]): Promise<bigint | undefined> {
  const descriptors = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  let largest: bigint | undefined;
  for (const descriptor of descriptors) {
    // stat follows the descriptor's link to the open file, even a deleted one.
    const opened = await stat(`/proc/${pid}/fd/${descriptor}`, { bigint: true }).catch(() => undefined);
    if (opened && files.some((file) => file.dev === opened.dev && file.ino === opened.ino)) {
      if (largest === undefined || opened.size > largest) largest = opened.size;
    }
  }
  return largest;
}
