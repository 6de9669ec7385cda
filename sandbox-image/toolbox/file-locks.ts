// Serializes writes and edits of one file, so several edits of it sent at once (parallel tool
// calls of one step) all apply instead of overwriting each other's read-modify-write. Within a
// process a promise chain orders them; across processes (`call` mode runs one process per
// request) a lock file under the home does, created with O_EXCL and holding the owner's pid and
// start time so a lock left by a killed process is taken over, even once its pid is reused.
// Code in the sandbox can write under the home too: what it puts at a lock's name is never
// waited on, followed or read whole.
import { createHash } from 'node:crypto';
import { type FileHandle, lstat, mkdir, open, unlink } from 'node:fs/promises';
import path from 'node:path';
import { openToRead, readUpTo } from './bounded-read.ts';
import { isLive, processEntryOf, startTicksOf } from './process-table.ts';
import { ToolboxError } from './toolbox-error.ts';

const tails = new Map<string, Promise<unknown>>();
const RETRY_MS = 5;
const WAIT_LIMIT_MS = 30_000;
/** How old a lock of a dead owner must be to be taken over (see removeIfStale). */
const STALE_AFTER_MS = 1_000;
/** A holder writes its pid and start time, a few digits each; a longer file is no holder's lock. */
const LOCK_MAX_BYTES = 64;

export interface LockWait {
  /** How long to wait for another holder (default 30 s). */
  limitMs: number;
  /** The TIMEOUT message when the wait runs out. */
  message: string;
}

/** What a holder writes: `pid startTicks` (just the pid without /proc). */
const OWNER = [process.pid, startTicksOf(process.pid)].filter((part) => part !== undefined).join(' ');

const EDIT_WAIT: LockWait = { limitMs: WAIT_LIMIT_MS, message: 'Another edit of this file has been running for 30 s; try again' };

export async function withFileLock<T>(home: string, key: string, work: () => Promise<T>, wait: LockWait = EDIT_WAIT): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  const locked = async () => {
    const release = await acquireLockFile(home, key, wait);
    try {
      return await work();
    } finally {
      await release();
    }
  };
  const current = previous.then(locked, locked);
  const tail = current.catch(() => undefined);
  tails.set(key, tail);
  try {
    return await current;
  } finally {
    if (tails.get(key) === tail) tails.delete(key);
  }
}

async function acquireLockFile(home: string, key: string, wait: LockWait): Promise<() => Promise<void>> {
  const directory = path.join(home, 'locks');
  await mkdir(directory, { recursive: true });
  const lockPath = path.join(directory, `${createHash('sha256').update(key).digest('hex').slice(0, 32)}.lock`);
  const deadline = Date.now() + wait.limitMs;
  for (;;) {
    try {
      const handle = await open(lockPath, 'wx');
      await handle.writeFile(OWNER);
      await handle.close();
      return () => unlink(lockPath).catch(() => undefined);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    await removeIfStale(lockPath);
    if (Date.now() > deadline) {
      throw new ToolboxError('TIMEOUT', wait.message);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

/**
 * Removes the lock file if its owner died holding it. The owner's pid, the file's age and its
 * identity come from one open file, and the file is removed only if it is still that file:
 * in `call` mode a holder exits right after its release, so a pid read from one lock is soon
 * dead while the next holder's lock already stands under the same name. Judging that new
 * lock by the old pid let two edits in at once (one of eight concurrent edits was lost, once).
 * A holder writes its pid at once, so a dead pid in a file older than STALE_AFTER_MS is stale.
 *
 * Holders make only regular files holding a pid (O_EXCL, so never through a symlink).
 * Anything else at the name (a FIFO, a socket, a symlink, a file too long for a pid) was put
 * there by code in the sandbox: it is removed, never waited on (a FIFO's open would hold one
 * of libuv's four threads for good) and never read to its end (a symlink to /dev/zero).
 */
async function removeIfStale(lockPath: string): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await openToRead(lockPath);
  } catch {
    // O_NOFOLLOW refuses a symlink (ELOOP), a socket cannot be opened (ENXIO).
    const standing = await lstat(lockPath).catch(() => undefined);
    if (standing && !standing.isFile()) await removeIfStill(lockPath, standing);
    return;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size > LOCK_MAX_BYTES) {
      await removeIfStill(lockPath, info);
      return;
    }
    const [pid, startTicks, ...rest] = (await readUpTo(handle, LOCK_MAX_BYTES)).toString('utf8').trim().split(' ').map(Number);
    // An empty file is a lock being written right now.
    if (!Number.isSafeInteger(pid) || pid! <= 0 || rest.length > 0 || processAlive(pid!, startTicks)) return;
    if (Date.now() - info.mtimeMs < STALE_AFTER_MS) return;
    await removeIfStill(lockPath, info);
  } finally {
    await handle.close();
  }
}

/** Unlinks the name only while it still names the file judged (the same inode on the same device). */
async function removeIfStill(lockPath: string, judged: { ino: number; dev: number }): Promise<void> {
  const now = await lstat(lockPath).catch(() => undefined);
  if (now?.ino === judged.ino && now.dev === judged.dev) await unlink(lockPath).catch(() => undefined);
}

/**
 * Whether the lock's owner still runs: not when its pid is gone, a zombie (killed, not yet
 * reaped), or another process's now (a start time unlike the one it wrote). A stopped owner
 * counts as running; serve kills stopped toolboxes of earlier sessions (stopped-sessions.ts).
 */
function processAlive(pid: number, startTicks: number | undefined): boolean {
  const entry = processEntryOf(pid);
  if (entry) return isLive(entry) && (startTicks === undefined || Number.isNaN(startTicks) || entry.startTicks === startTicks);
  // Without /proc (or gone): ask the kernel.
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
