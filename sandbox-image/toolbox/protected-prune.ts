// `import --prune GLOB...`: before the operator puts spec.verify.protect paths back from its
// own clone, everything in the workspace those globs cover is removed, so a file the model
// added under a protected path (a conftest.py, a test setup file) is gone too, and the tar
// then makes the protected paths exactly what the cloned commit holds. The walk never follows
// a symlink (it removes the link) and never enters the workspace's own .git, which the tools
// treat as git's own (a .git deeper down is the model's, and pruned like any other entry).
//
// Names are read and removed as bytes: a name that is not UTF-8 (`tests/\xff/conftest.py`)
// read as a string became U+FFFD, its removal found nothing, and the model's file stayed to
// decide the check. The globs are matched on the name as UTF-8 text, where such a byte is
// U+FFFD, which `**` and `*` cover (the operator picks its clone's files the same way,
// restore-protected.ts). A second walk then finds nothing protected left, or the import
// fails: a check run beside the model's files would grade them.
//
// A directory the model made unreadable (`chmod 300 tests`) hid what it holds from both walks,
// and one it made unwritable (`chmod 500`) kept it from being removed. The toolbox runs as the
// model's user, so a directory of that user is first given its owner's rwx back (the mode is
// not part of the diff); a directory that still cannot be read, or an entry that cannot be
// removed, fails the import with a message that says so, never a walk that saw nothing.
import type { Dirent, Stats } from 'node:fs';
import { chmod, lstat, readdir, rm } from 'node:fs/promises';
import { protectedPaths } from './contract/protected-paths.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

const SLASH = Buffer.from('/');
const OWNER_RWX = 0o700;

/** An fs error's code, or its message when it has none. */
function codeOf(error: unknown): string {
  return (error as NodeJS.ErrnoException | undefined)?.code ?? (error instanceof Error ? error.message : String(error));
}

/** True when the entry is gone (or is no longer a directory): nothing of it is left to prune. */
function vanished(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function unprunable(text: string, what: string, error: unknown): ToolboxError {
  return new ToolboxError(
    'IO_ERROR',
    `the workspace path ${JSON.stringify(text)} ${what} (${codeOf(error)}), so the spec.verify.protect paths could not be ` +
      'removed before the check: the check is not run beside them',
  );
}

/** Gives a directory of this process's user its owner's rwx back, so it can be read and emptied. */
async function openUp(absolute: Buffer, stats: Stats, text: string): Promise<void> {
  if (stats.uid !== process.geteuid?.() || (stats.mode & OWNER_RWX) === OWNER_RWX) return;
  await chmod(absolute, (stats.mode & 0o7777) | OWNER_RWX).catch((error: unknown) => {
    if (!vanished(error)) throw unprunable(text, 'could not be made readable', error);
  });
}

/** Every protected entry under the workspace (the topmost of each protected tree), as its path in bytes and in text. */
async function protectedEntries(root: string, globs: readonly string[]): Promise<Array<{ absolute: Buffer; text: string }>> {
  const isProtected = protectedPaths(globs);
  const found: Array<{ absolute: Buffer; text: string }> = [];
  // insideProtected: a protected directory is walked only to open up what rm must empty.
  const walk = async (relative: Buffer, insideProtected: boolean): Promise<void> => {
    const directory = Buffer.concat([Buffer.from(root), SLASH, relative]);
    let entries: Array<Dirent<Buffer>>;
    try {
      entries = await readdir(directory, { withFileTypes: true, encoding: 'buffer' });
    } catch (error) {
      if (vanished(error)) return;
      throw unprunable(relative.toString('utf8'), 'could not be read', error);
    }
    for (const entry of entries) {
      if (relative.length === 0 && entry.name.toString('latin1') === '.git') continue;
      const child = relative.length === 0 ? entry.name : Buffer.concat([relative, SLASH, entry.name]);
      const absolute = Buffer.concat([Buffer.from(root), SLASH, child]);
      const text = child.toString('utf8');
      const protectedHere = !insideProtected && isProtected(text);
      if (protectedHere) found.push({ absolute, text });
      // lstat, not the dirent alone: a symlink to a directory is never walked into.
      let stats: Stats;
      try {
        stats = await lstat(absolute);
      } catch (error) {
        if (vanished(error)) continue;
        throw unprunable(text, 'could not be examined', error);
      }
      if (!stats.isDirectory()) continue;
      await openUp(absolute, stats, text);
      await walk(child, insideProtected || protectedHere);
    }
  };
  await walk(Buffer.alloc(0), false);
  return found;
}

/** Removes every workspace path the globs protect; returns how many entries were removed. */
export async function pruneProtected(context: ToolboxContext, globs: readonly string[]): Promise<number> {
  const entries = await protectedEntries(context.realRoot, globs);
  for (const { absolute, text } of entries)
    await rm(absolute, { recursive: true, force: true }).catch((error: unknown) => {
      throw unprunable(text, 'could not be removed', error);
    });
  const left = await protectedEntries(context.realRoot, globs);
  if (left.length > 0)
    throw new ToolboxError(
      'IO_ERROR',
      `protected paths are still in the workspace after they were removed (${left
        .slice(0, 3)
        .map((entry) => JSON.stringify(entry.text))
        .join(', ')}): the check is not run beside them`,
    );
  return entries.length;
}
