// The workers' git (isolated-git-environment.ts) and the toolbox's own git (helper-programs.ts)
// run with one HOME, contract/no-home.ts's: a directory that does not exist, so neither reads a
// user's ~/.gitconfig or ~/.config/git, nor can anything be left there for a later git to read.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isolatedGitEnvironment } from '../../operator/src/workers/isolated-git-environment.ts';
import { NO_HOME } from '../../sandbox-image/toolbox/contract/no-home.ts';
import { isolatedHelperGitEnvironment } from '../../sandbox-image/toolbox/helper-programs.ts';

describe("git's HOME when it needs none", () => {
  it('is one directory that does not exist, for the workers and the toolbox alike', () => {
    const environment = { PATH: '/usr/bin:/bin', HOME: '/home/dev' };
    const workers = isolatedGitEnvironment(environment).HOME;
    const toolbox = isolatedHelperGitEnvironment({ realRoot: '/workspace', home: '/home/toolbox' }, environment).HOME;
    expect(workers).toBe(NO_HOME);
    expect(toolbox).toBe(NO_HOME);
    expect(NO_HOME).toBe('/nonexistent');
    expect(existsSync(NO_HOME)).toBe(false);
  });
});
