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
// U+FFFD, which `**` and `*` cover. A second walk then finds nothing protected left, or the
// import fails: a check run beside the model's files would grade them.
import { lstat, readdir, rm } from 'node:fs/promises';
import { protectedPaths } from './contract/protected-paths.ts';
import type { ToolboxContext } from './toolbox-context.ts';

const SLASH = Buffer.from('/');

/** Every protected entry under the workspace (not walked into), as its path in bytes and in text. */
async function protectedEntries(root: string, globs: readonly string[]): Promise<Array<{ absolute: Buffer; text: string }>> {
  const isProtected = protectedPaths(globs);
  const found: Array<{ absolute: Buffer; text: string }> = [];
  const walk = async (relative: Buffer): Promise<void> => {
    const directory = Buffer.concat([Buffer.from(root), SLASH, relative]);
    const entries = await readdir(directory, { withFileTypes: true, encoding: 'buffer' }).catch(() => []);
    for (const entry of entries) {
      if (relative.length === 0 && entry.name.toString('latin1') === '.git') continue;
      const child = relative.length === 0 ? entry.name : Buffer.concat([relative, SLASH, entry.name]);
      const absolute = Buffer.concat([Buffer.from(root), SLASH, child]);
      const text = child.toString('utf8');
      if (isProtected(text)) {
        found.push({ absolute, text });
        continue;
      }
      // lstat, not the dirent alone: a symlink to a directory is never walked into.
      const stats = await lstat(absolute).catch(() => undefined);
      if (stats?.isDirectory()) await walk(child);
    }
  };
  await walk(Buffer.alloc(0));
  return found;
}

/** Removes every workspace path the globs protect; returns how many entries were removed. */
export async function pruneProtected(context: ToolboxContext, globs: readonly string[]): Promise<number> {
  const entries = await protectedEntries(context.realRoot, globs);
  for (const { absolute } of entries) await rm(absolute, { recursive: true, force: true });
  const left = await protectedEntries(context.realRoot, globs);
  if (left.length > 0)
    throw new Error(
      `protected paths are still in the workspace after they were removed (${left
        .slice(0, 3)
        .map((entry) => JSON.stringify(entry.text))
        .join(', ')}): the check is not run beside them`,
    );
  return entries.length;
}
