// Reading a workspace file the model or the repository may have made anything: a FIFO, a
// symlink swapped in after a check, a file that grows while it is read.
import { constants, type FileHandle, open } from 'node:fs/promises';

/**
 * Opens a file to read. O_NONBLOCK: opening a FIFO would otherwise wait for a writer and hold
 * one of libuv's few threads, which every fs call of the session shares. O_NOFOLLOW: the path
 * is already resolved, so a symlink here was swapped in after the check and is not followed.
 */
export function openToRead(path: string): Promise<FileHandle> {
  return open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
}

/** Up to `count` bytes from the file's start, however large it is or grows meanwhile. */
export async function readUpTo(handle: FileHandle, count: number): Promise<Buffer> {
  const buffer = Buffer.alloc(count);
  let filled = 0;
  while (filled < count) {
    const { bytesRead } = await handle.read(buffer, filled, count - filled, filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}

/**
 * The first `max` bytes of a small file the toolbox keeps in its home, where code in the
 * sandbox can write too (a job's pid or exit code, the bash state): undefined when it is
 * missing or anything but a regular file (a FIFO, a symlink, a device), which is neither
 * waited on nor read to its end.
 */
export async function readSmallFile(path: string, max: number): Promise<Buffer | undefined> {
  let handle: FileHandle;
  try {
    handle = await openToRead(path);
  } catch {
    return undefined;
  }
  try {
    if (!(await handle.stat()).isFile()) return undefined;
    return await readUpTo(handle, max);
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}
