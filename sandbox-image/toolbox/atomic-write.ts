// Replaces a file atomically: the bytes go to a temporary file in the same directory (same
// filesystem, so rename is atomic), which is then renamed over the target. An interrupted
// write leaves the old file intact; the target's permission bits are kept.
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';

export async function writeFileAtomic(realTarget: string, bytes: Uint8Array): Promise<void> {
  const directory = path.dirname(realTarget);
  await mkdir(directory, { recursive: true });
  let mode = 0o644;
  try {
    mode = (await stat(realTarget)).mode & 0o7777;
  } catch {
    // A new file gets the default mode.
  }
  const temporary = path.join(directory, `.${path.basename(realTarget)}.${randomBytes(6).toString('hex')}.chamvi-tmp`);
  const handle = await open(temporary, 'wx', mode);
  try {
    await handle.writeFile(bytes);
    await handle.chmod(mode);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  await handle.close();
  try {
    await rename(temporary, realTarget);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}
