// Where a `kubectl codingrun run --local` test works: a temporary directory with a repository
// to run against and the plugin's own TMPDIR, so a test can see what the plugin leaves there.
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRepository } from './git-fixture.ts';

export const toolboxPath = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

export interface LocalWorkspace {
  /** The temporary directory holding the rest; the test removes it. */
  work: string;
  /** The plugin's TMPDIR: sandboxes and a started redis-server put their directories here. */
  pluginTmp: string;
  /** work/hello: README.md "Hello\n" in one commit on main. */
  repo: string;
}

export function createLocalWorkspace(prefix: string): LocalWorkspace {
  if (!existsSync(toolboxPath)) throw new Error(`${toolboxPath} is missing: run make toolbox`);
  const work = mkdtempSync(join(tmpdir(), prefix));
  const pluginTmp = join(work, 'tmp');
  mkdirSync(pluginTmp);
  const repo = join(work, 'hello');
  createRepository(repo);
  return { work, pluginTmp, repo };
}
