// The operator picks the spec.verify.protect files of its own clone (workers/restore-protected.ts)
// by their names as bytes, as the toolbox's prune removes them: a directory whose name is not
// UTF-8 anywhere in the repository made the string walk throw, and a protected file so named
// was listed as U+FFFD, which tar could not find; either way each of ten retries re-cloned and
// the run ended AgentFailed instead of graded. The clone is real git, the archive real tar;
// the sandbox unpacks what it is sent with tar, byte for byte.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import type { ImportOptions, Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { protectedFilesIn, restoreProtected } from '../../operator/src/workers/restore-protected.ts';

const scratch = mkdtempSync(join(tmpdir(), 'restore-bytes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const CAFE = Buffer.from('test/caf\xe9.js', 'latin1');
const CAFE_CONTENT = Buffer.from('// caf\xe9\nmodule.exports = 1;\n', 'latin1');

/** A committed repository with `docs-\xe9/x.txt` (unprotected) and `test/caf\xe9.js`, `test/a.test.js`. */
function repositoryWithLatin1Names(): { repo: string; revision: string } {
  const repo = mkdtempSync(join(scratch, 'repo-'));
  mkdirSync(join(repo, 'test'));
  const docs = Buffer.concat([Buffer.from(`${repo}/`), Buffer.from('docs-\xe9', 'latin1')]);
  mkdirSync(docs);
  writeFileSync(Buffer.concat([docs, Buffer.from('/x.txt')]), 'x\n');
  writeFileSync(Buffer.concat([Buffer.from(`${repo}/`), CAFE]), CAFE_CONTENT);
  writeFileSync(join(repo, 'test', 'a.test.js'), 'ok\n');
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' }).trim();
  git('init', '-q');
  git('add', '.');
  git('commit', '-qm', 'x');
  return { repo, revision: git('rev-parse', 'HEAD') };
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

describe('restoring protected paths whose names are not UTF-8', () => {
  it('lists the protected files by their bytes, past a directory whose name is not UTF-8', async () => {
    const { repo } = repositoryWithLatin1Names();
    const files = await protectedFilesIn(repo, ['test/**']);
    expect(files.map((file) => file.toString('latin1'))).toEqual(['test/a.test.js', 'test/caf\xe9.js']);
  });

  it('restores a protected file named in Latin-1 byte-exact', async () => {
    const { repo, revision } = repositoryWithLatin1Names();
    const workspace = mkdtempSync(join(scratch, 'workspace-'));
    const unpacking: ImportOptions[] = [];
    const unpacker = {
      importTree: async (tar: AsyncIterable<Uint8Array>, options: ImportOptions = {}) => {
        unpacking.push(options);
        const chunks: Buffer[] = [];
        for await (const chunk of tar) chunks.push(Buffer.from(chunk));
        execFileSync('tar', ['-C', workspace, '-xf', '-'], { input: Buffer.concat(chunks) });
      },
    } as unknown as Sandbox;
    expect(await restoreProtected(deps, run(repo), revision, unpacker, 30_000)).toBe(2);
    expect(unpacking).toEqual([expect.objectContaining({ prune: ['test/**'] })]);
    expect(readFileSync(Buffer.concat([Buffer.from(`${workspace}/`), CAFE]))).toEqual(CAFE_CONTENT);
    expect(readFileSync(join(workspace, 'test', 'a.test.js'), 'utf8')).toBe('ok\n');
  });

  it('fails the check closed when the toolbox refuses the restore, instead of retrying it', async () => {
    const { repo, revision } = repositoryWithLatin1Names();
    const refusing = {
      importTree: async (tar: AsyncIterable<Uint8Array>) => {
        for await (const _chunk of tar);
        throw new SandboxError(
          'IMPORT_REFUSED',
          'the toolbox refused the workspace archive: the workspace path "test/x" could not be read',
          {
            toolErrorCode: 'IO_ERROR',
          },
        );
      },
    } as unknown as Sandbox;
    const failure = await restoreProtected(deps, run(repo), revision, refusing, 30_000).catch((error: unknown) => error);
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('VerificationFailed');
    expect((failure as Error).message).toMatch(/could not be put back: .*"test\/x" could not be read; nothing was graded/);
  });
});
