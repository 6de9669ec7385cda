// `import --prune GLOB...`: before the operator puts spec.verify.protect paths back from its
// own clone, everything in the workspace those globs cover is removed, so a file the model
// added under a protected path (a conftest.py, a test setup file) is gone too, and the tar
// then makes the protected paths exactly what the cloned commit holds. The walk never follows
// a symlink (it removes the link) and never enters .git, which the tools treat as git's own.
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { protectedPaths } from './contract/protected-paths.ts';
import type { ToolboxContext } from './toolbox-context.ts';

/** Removes every workspace path the globs protect; returns how many entries were removed. */
export async function pruneProtected(context: ToolboxContext, globs: readonly string[]): Promise<number> {
  const isProtected = protectedPaths(globs);
  let removed = 0;
  const walk = async (relative: string): Promise<void> => {
    const entries = await readdir(path.join(context.realRoot, relative), { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (entry.name === '.git') continue;
      const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
      const absolute = path.join(context.realRoot, child);
      if (isProtected(child)) {
        await rm(absolute, { recursive: true, force: true });
        removed += 1;
        continue;
      }
      // lstat, not the dirent alone: a symlink to a directory is never walked into.
      const stats = await lstat(absolute).catch(() => undefined);
      if (stats?.isDirectory()) await walk(child);
    }
  };
  await walk('');
  return removed;
}
