// Serializes writes and edits of one file, so several edits of it sent at once (parallel tool
// calls of one step) all apply instead of overwriting each other's read-modify-write. Within a
// process a promise chain orders them; across processes (`call` mode runs one process per
// request) a lock file under the home does, created with O_EXCL and holding the owner's pid so
// a lock left by a killed process is taken over.
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { ToolboxError } from './toolbox-error.ts';

const tails = new Map<string, Promise<unknown>>();
const RETRY_MS = 5;
const WAIT_LIMIT_MS = 30_000;

export interface LockWait {
  /** How long to wait for another holder (default 30 s). */
  limitMs: number;
  /** The TIMEOUT message when the wait runs out. */
  message: string;
}

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
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => unlink(lockPath).catch(() => undefined);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number((await readFile(lockPath, 'utf8').catch(() => '')).trim());
    // An empty file is a lock being written right now; a dead owner's lock is stale.
    if (Number.isSafeInteger(owner) && owner > 0 && !processAlive(owner)) await unlink(lockPath).catch(() => undefined);
    if (Date.now() > deadline) {
      throw new ToolboxError('TIMEOUT', wait.message);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
