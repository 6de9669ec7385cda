// A command started in a clone of the run's repository finds git and tar by the absolute
// entries of PATH only: a relative entry is looked up from the clone, where a repository may
// have committed `bin/tar` or `node_modules/.bin/git`.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { sandboxEnvironment } from '../../operator/src/cli/local/local-sandbox-factory.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { absolutePath } from '../../operator/src/workers/absolute-path.ts';
import { launchHere, launchToEnd, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { applyDiff, headRevision } from '../../operator/src/workers/apply-diff.ts';
import { refFreeArchive } from '../../operator/src/workers/clone-cache.ts';
import { gitEnvironment } from '../../operator/src/workers/git-clone.ts';
import { isolatedGitEnvironment } from '../../operator/src/workers/isolated-git-environment.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { REASONS } from '../../operator/src/api/reasons.ts';
import { createRepository, git } from '../support/git-fixture.ts';

const savedPath = process.env.PATH;
const dirs: string[] = [];
afterEach(() => {
  process.env.PATH = savedPath;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('absolutePath', () => {
  it('keeps the absolute entries in their order and drops empty and relative ones', () => {
    expect(absolutePath(['', '.', 'bin', '/usr/local/bin', 'node_modules/.bin', '/usr/bin'].join(path.delimiter))).toBe(
      ['/usr/local/bin', '/usr/bin'].join(path.delimiter),
    );
    expect(absolutePath(undefined)).toBeUndefined();
  });

  // An empty PATH is searched from the working directory by node's spawn and /bin/sh alike.
  it.each([[''], [['node_modules/.bin', '.'].join(path.delimiter)], [['', 'bin'].join(path.delimiter)]])(
    'gives the system directories for %j, which has no absolute entry, never an empty PATH',
    (value) => {
      expect(absolutePath(value)).toBe(['/usr/bin', '/bin'].join(path.delimiter));
    },
  );

  it('drops absolute entries under /proc and /dev, which may name the working directory', () => {
    const entries = ['/proc/self/cwd', '/proc/thread-self/cwd/bin', '/dev/fd/3', '/usr/../proc/self/cwd', '/usr/bin', '/procfs/bin'];
    expect(absolutePath(entries.join(path.delimiter))).toBe(['/usr/bin', '/procfs/bin'].join(path.delimiter));
    expect(absolutePath('/proc/self/cwd')).toBe(['/usr/bin', '/bin'].join(path.delimiter));
  });
});

describe('a relative PATH entry and a repository that committed its own tar', () => {
  it('runs the system tar, not the clone’s bin/tar', async () => {
    const clone = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
    dirs.push(clone);
    mkdirSync(path.join(clone, 'bin'));
    writeFileSync(path.join(clone, 'bin/tar'), `#!/bin/sh\ntouch ${clone}/ran\n`);
    chmodSync(path.join(clone, 'bin/tar'), 0o755);
    process.env.PATH = `bin${path.delimiter}${savedPath}`;
    await launchToEnd(launchHere, 'tar', ['-cf', 'out.tar', '--files-from', '/dev/null'], clone);
    expect(existsSync(path.join(clone, 'ran'))).toBe(false);
    expect(existsSync(path.join(clone, 'out.tar'))).toBe(true);
  });

  it('gives run --local tools a PATH of absolute entries only', () => {
    const parsed = parseSpec(codingRunFixture());
    if (!parsed.ok) throw new Error('fixture');
    const run = { ...codingRunFixture(), spec: parsed.spec } as Parameters<typeof sandboxEnvironment>[0];
    const env = sandboxEnvironment(run, '/tmp/home', { PATH: `node_modules/.bin${path.delimiter}.${path.delimiter}/usr/bin` });
    expect(env.PATH).toBe('/usr/bin');
  });
});

/** An executable `git` at `relative` inside `dir` that leaves `ran` in `dir` and prints `prints`. */
function plantGit(dir: string, relative: string, prints = ''): string {
  const at = path.join(dir, relative);
  mkdirSync(path.dirname(at), { recursive: true });
  writeFileSync(at, `#!/bin/sh\ntouch '${dir}/ran'\nprintf '%s\\n' '${prints}'\n`);
  chmodSync(at, 0o755);
  return path.join(dir, 'ran');
}

/** A repository at a new directory, holding README.md, with a `git` of its own at each of `planted`. */
function repositoryWithItsOwnGit(...planted: string[]): { repo: string; marker: string } {
  const repo = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
  dirs.push(repo);
  createRepository(repo, { 'README.md': 'Hello\n' });
  let marker = '';
  for (const relative of planted) marker = plantGit(repo, relative, 'f'.repeat(40));
  return { repo, marker };
}

const RELATIVE_GITS = ['node_modules/.bin/git', 'bin/git', 'git'];
const relativePath = () => ['node_modules/.bin', 'bin', '.', '', savedPath].join(path.delimiter);

describe("the workers' git in a clone whose repository committed its own git, with relative PATH entries", () => {
  it('headRevision runs the system git when PATH has only relative entries', async () => {
    const { repo, marker } = repositoryWithItsOwnGit(...RELATIVE_GITS);
    const head = git(['rev-parse', 'HEAD'], repo).trim();
    process.env.PATH = ['node_modules/.bin', '.'].join(path.delimiter);
    expect(await headRevision(repo)).toBe(head);
    expect(existsSync(marker)).toBe(false);
  });

  it('headRevision runs the system git and returns the real commit', async () => {
    const { repo, marker } = repositoryWithItsOwnGit(...RELATIVE_GITS);
    const head = git(['rev-parse', 'HEAD'], repo).trim();
    process.env.PATH = relativePath();
    expect(await headRevision(repo)).toBe(head);
    expect(existsSync(marker)).toBe(false);
  });

  it('applyDiff (and the reads of its cost) run the system git and apply the diff', async () => {
    const { repo, marker } = repositoryWithItsOwnGit(...RELATIVE_GITS);
    process.env.PATH = relativePath();
    const diff = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';
    expect(await applyDiff(repo, diff)).toEqual({ applied: true });
    expect(readFileSync(path.join(repo, 'README.md'), 'utf8')).toBe('Hello, world\n');
    expect(existsSync(marker)).toBe(false);
  });

  it("the clone cache's look at a clone runs the system git", async () => {
    const { repo, marker } = repositoryWithItsOwnGit(...RELATIVE_GITS);
    git(['checkout', '-q', '--detach'], repo);
    git(['branch', '-q', '-D', 'main'], repo);
    process.env.PATH = relativePath();
    expect(await refFreeArchive(repo, '/archive.tar')).toMatchObject({ path: '/archive.tar', tag: undefined });
    expect(existsSync(marker)).toBe(false);
  });

  it("the clone's and publishing's git (gitEnvironment) keep the base and add the checked origin's settings", async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
    dirs.push(home);
    process.env.PATH = relativePath();
    expect(await gitEnvironment({ scheme: 'https', host: 'git.example', path: '/a/b.git' }, undefined, home)).toMatchObject({
      ...isolatedGitEnvironment({ PATH: savedPath }),
      HOME: home,
      GIT_ALLOW_PROTOCOL: 'https',
    });
  });

  it('every git the workers start begins from an environment of absolute PATH entries, no HOME, no config, no replace refs', () => {
    expect(
      isolatedGitEnvironment({ PATH: `node_modules/.bin${path.delimiter}/usr/bin${path.delimiter}.`, HOME: '/home/me', SECRET: 'x' }),
    ).toEqual({
      PATH: '/usr/bin',
      HOME: '/nonexistent',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_NO_REPLACE_OBJECTS: '1',
      GIT_TERMINAL_PROMPT: '0',
    });
  });
});

describe('headRevision and a git that does not print a commit id', () => {
  /** launchHere, with git found first in `dir` (an absolute entry: a git the machine has that answers oddly). */
  const gitFrom =
    (dir: string): Launch =>
    (command, args, options) =>
      launchHere(command, args, { ...options, env: { ...options.env, PATH: `${dir}${path.delimiter}${options.env.PATH ?? ''}` } });

  it.each([['forged'], ['-rf /'], ['F'.repeat(40)], [`${'f'.repeat(40)}\n${'e'.repeat(40)}`]])(
    'fails the run CloneFailed, never returning %j as the revision',
    async (prints) => {
      const { repo } = repositoryWithItsOwnGit();
      const odd = mkdtempSync(path.join(tmpdir(), 'chamvi-odd-git-'));
      dirs.push(odd);
      plantGit(odd, 'git', prints);
      const error = await headRevision(repo, gitFrom(odd)).catch((e: unknown) => e);
      expect(RunFailure.isInstance(error)).toBe(true);
      expect(error).toMatchObject({ reason: REASONS.CloneFailed, message: expect.stringContaining('not a commit id') as unknown });
      expect(existsSync(path.join(odd, 'ran'))).toBe(true);
    },
  );
});
