// A submodule under a spec.verify.protect glob: git records it as a gitlink (mode 160000), and a
// clone that never initialises it (the operator's, the sandbox's) holds an empty directory there.
// The toolbox's prune removes the topmost protected entry, directories included; the restore
// listed only the clone's files and symlinks, so the empty directory was not made again, the
// diff showed `deleted file mode 160000`, and every run ended VerificationFailed. The clone is
// real git, the archive real tar, the prune and unpack the toolbox's own code.
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { ImportOptions, Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { protectedFilesIn, restoreProtected } from '../../operator/src/workers/restore-protected.ts';
import { pruneProtected } from '../../sandbox-image/toolbox/protected-prune.ts';
import { importTar } from '../../sandbox-image/toolbox/tar-import.ts';
import { createContext } from '../../sandbox-image/toolbox/toolbox-context.ts';

const scratch = mkdtempSync(join(tmpdir(), 'restore-gitlink-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const git = (dir: string, ...args: string[]) =>
  execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'protocol.file.allow=always', ...args], {
    encoding: 'utf8',
  }).trim();

/** A committed repository with `test/a.test.js` and a submodule (gitlink) at `test/fixtures`, never initialised. */
function repositoryWithGitlink(): { repo: string; revision: string } {
  const repo = mkdtempSync(join(scratch, 'repo-'));
  mkdirSync(join(repo, 'test'));
  writeFileSync(join(repo, 'test', 'a.test.js'), 'ok\n');
  git(repo, 'init', '-q');
  git(repo, 'add', '.');
  git(repo, 'update-index', '--add', '--cacheinfo', `160000,${'0cfa4b4317d1628a4db611cc776f3152efc8373f'},test/fixtures`);
  git(repo, 'commit', '-qm', 'x');
  return { repo, revision: git(repo, 'rev-parse', 'HEAD') };
}

const run = (repo: string) =>
  ({
    metadata: { name: 'r', namespace: 'ns', uid: 'uid-1' },
    spec: { repository: { url: `file://${repo}` }, verify: { protect: ['test/**'] } },
  }) as unknown as ParsedCodingRun;
const deps = {
  clonePolicy: { allowRepo: [`file://${scratch}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
  resources: { secretValue: async () => 'unused' },
} as unknown as Parameters<typeof restoreProtected>[0];

/** The sandbox's side of the restore, as the toolbox does it (workspace-import.ts): prune, then a literal unpack. */
function toolboxSandbox(workspace: string): Sandbox {
  const context = createContext({ root: workspace, home: mkdtempSync(join(scratch, 'home-')) });
  return {
    importTree: async (tar: AsyncIterable<Uint8Array>, options: ImportOptions = {}) => {
      await pruneProtected(context, options.prune ?? []);
      return importTar(context, tar, { literal: true });
    },
  } as unknown as Sandbox;
}

describe('restoring protected paths that hold an uninitialised submodule', () => {
  it('lists the gitlink’s empty directory beside the protected files', async () => {
    const { repo } = repositoryWithGitlink();
    const clone = join(scratch, 'listed');
    git(scratch, 'clone', '-q', repo, clone);
    const entries = await protectedFilesIn(clone, ['test/**']);
    expect(entries.map(String)).toEqual(['test/a.test.js', 'test/fixtures']);
  });

  it('puts the submodule’s empty directory back, so the diff against the clone shows no change', async () => {
    const { repo, revision } = repositoryWithGitlink();
    const workspace = join(scratch, 'workspace');
    git(scratch, 'clone', '-q', repo, workspace);
    expect(lstatSync(join(workspace, 'test', 'fixtures')).isDirectory()).toBe(true);
    writeFileSync(join(workspace, 'test', 'a.test.js'), 'weakened\n');

    await restoreProtected(deps, run(repo), revision, toolboxSandbox(workspace), 30_000);

    expect(readFileSync(join(workspace, 'test', 'a.test.js'), 'utf8')).toBe('ok\n');
    expect(lstatSync(join(workspace, 'test', 'fixtures')).isDirectory()).toBe(true);
    expect(git(workspace, 'diff', revision)).toBe('');
  });
});
