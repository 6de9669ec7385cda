// The run's diff as the finalize job and the diff snapshots take it (workers/take-diff.ts):
// through a real toolbox session in a real git repository, against HEAD with new files, the
// operator's counts of it, and the cut at LIMITS.fullDiff read back whole from the output log.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LIMITS } from '../../operator/src/api/index.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { takeDiff } from '../../operator/src/workers/take-diff.ts';
import { DiffBaseMissingError } from '../../operator/src/workers/errors/diff-base-missing-error.ts';
import { REASONS, codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { buildDiffConfigMap, type DiffConfigMap } from '../../operator/src/reconcile/diff-config-map.ts';
import { countDiff, keptDiffResult } from '../../operator/src/reconcile/kept-diff.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { decideContinuation } from '../../operator/src/workers/continuation.ts';
import { takeSandboxDiff } from '../../operator/src/workers/keep-diff.ts';
import { startPublish } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { makeWorkspace, openSession, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
let session: LocalSandbox;
/** The tools each takeDiff asked the sandbox for, in order. */
let calls: string[];
let sandbox: Sandbox;

beforeEach(async () => {
  workspace = makeWorkspace();
  workspace.write({ 'a.txt': 'one\ntwo\n', 'b.txt': 'kept\n' });
  workspace.git('init', '-q');
  workspace.git('add', '.');
  workspace.git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
  session = await openSession(workspace);
  calls = [];
  sandbox = {
    ...session,
    call: (request: ToolRequest, options) => {
      calls.push(request.tool);
      return session.call(request, options);
    },
  };
});
afterEach(async () => {
  await session.close();
  workspace.cleanup();
});

describe('takeDiff', () => {
  it("takes a changed and a new file in one call to the sandbox, counted as git's shortstat counts them", async () => {
    workspace.write({ 'a.txt': 'one\nTWO\n', 'new.txt': 'fresh\nlines\n' });
    const taken = await takeDiff(sandbox);
    expect(taken.diff).toMatch(/^diff --git a\/a\.txt b\/a\.txt\n/);
    expect(taken.diff).toContain('-two\n+TWO\n');
    expect(taken.diff).toContain('diff --git a/new.txt b/new.txt\n');
    expect(taken.diff).toContain('+fresh\n+lines\n');
    expect(countDiff(taken.diff)).toEqual({ filesChanged: 2, insertions: 3, deletions: 1 });
    expect(taken.truncated).toBe(false);
    expect(calls).toEqual(['bash']);
  });

  it("keeps git's a/ and b/ prefixes whatever the sandbox's .git/config says, so the diff applies to the files it names", async () => {
    workspace.git('config', 'diff.noprefix', 'true');
    workspace.git('config', 'diff.relative', 'true');
    workspace.write({ 'a.txt': 'one\nTWO\n' });
    const taken = await takeDiff(sandbox);
    expect(taken.diff).toMatch(/^diff --git a\/a\.txt b\/a\.txt\n/);
    expect(taken.diff).toContain('\n--- a/a.txt\n+++ b/a.txt\n');
  });

  it('takes what the model committed too, against the commit the run cloned', async () => {
    const cloned = workspace.git('rev-parse', 'HEAD').trim();
    // Told not to, a model commits part of its work; the rest stays in the tree.
    workspace.write({ 'a.txt': 'one\nTWO\n' });
    workspace.git('commit', '-qam', 'wip');
    workspace.write({ 'new.txt': 'fresh\n' });
    const taken = await takeDiff(sandbox, {}, cloned);
    expect(taken.diff).toContain('-two\n+TWO\n');
    expect(taken.diff).toContain('+fresh\n');
    expect(countDiff(taken.diff)).toEqual({ filesChanged: 2, insertions: 2, deletions: 1 });
    // Against HEAD (no base known) the committed part was lost.
    expect((await takeDiff(sandbox)).diff).not.toContain('+TWO');
  });

  it('takes the diff against HEAD when the base is not a commit name, and never runs it', async () => {
    workspace.write({ 'a.txt': 'one\nTWO\n' });
    for (const base of ['$(touch pwned)', 'HEAD; touch pwned']) {
      const taken = await takeDiff(sandbox, {}, base);
      expect(taken.diff).toContain('-two\n+TWO\n');
    }
    expect(workspace.git('status', '--porcelain', '--untracked-files=all')).not.toContain('pwned');
  });

  // A base the objects do not hold: falling back to HEAD took the change against a commit the
  // model chose (take-diff-model-git-state.test.ts has the model deleting the clone's commit).
  it('fails with DiffBaseMissingError, rather than take the diff against HEAD, when the base is not in the repository', async () => {
    workspace.write({ 'a.txt': 'one\nTWO\n' });
    await expect(takeDiff(sandbox, {}, 'f'.repeat(40))).rejects.toSatisfy(DiffBaseMissingError.isInstance);
  });

  it("takes a copy as a new file, whatever the sandbox's git config says (a copy is refused where a diff is applied)", async () => {
    workspace.git('config', 'diff.renames', 'copies');
    workspace.write({ 'a.txt': 'one\ntwo\nthree\nfour\n', 'c.txt': 'one\ntwo\n' });
    const taken = await takeDiff(sandbox);
    expect(taken.diff).not.toMatch(/^copy (from|to) /m);
    expect(taken.diff).toContain('diff --git a/c.txt b/c.txt\nnew file mode 100644\n');
    expect(taken.diff).toContain('+one\n+two\n');
  });

  // Snapshots are taken after every step that may change files (diff-snapshot.ts), and the
  // model's background jobs outlive steps (TOOLS.md): a snapshot that swept them stopped a dev
  // server after the step that started it. The verify check's clean shell still stops them.
  it("leaves the model's background jobs running, where the verify check's clean shell stops them", async () => {
    const started = await session.call({ tool: 'bash', input: { command: 'echo up; sleep 60', background: true } });
    const { job } = (started as { ok: true; result: { job: string } }).result;
    const status = async () =>
      ((await session.call({ tool: 'bash_output', input: { job } })) as { ok: true; result: { status: string } }).result.status;
    workspace.write({ 'a.txt': 'one\nTWO\n' });
    expect((await takeDiff(sandbox, { timeoutMs: 30_000 })).diff).toContain('+TWO\n');
    expect(await status()).toBe('running');
    await session.call({ tool: 'bash', input: { command: 'true' }, clean: true });
    expect(await status()).not.toBe('running');
  });

  // The take runs on an index of its own, never the model's: a bash killed at its timeout inside `git add`
  // left .git/index.lock behind, and the model's background jobs may hold it at that moment;
  // `git add` on the model's index then failed silently and every new file was missing from the
  // diff kept and published (and the model's own git commands failed on the lock left).
  it("takes new files while .git/index.lock is held, and leaves the lock and the model's index as they were", async () => {
    const gitDir = path.join(workspace.root, '.git');
    writeFileSync(path.join(gitDir, 'index.lock'), 'held\n');
    const index = readFileSync(path.join(gitDir, 'index'));
    workspace.write({ 'a.txt': 'one\nTWO\n', 'new.txt': 'fresh\n' });
    const taken = await takeDiff(sandbox, { timeoutMs: 30_000 });
    expect(taken.diff).toContain('-two\n+TWO\n');
    expect(taken.diff).toContain('diff --git a/new.txt b/new.txt\nnew file mode 100644\n');
    expect(readFileSync(path.join(gitDir, 'index.lock'), 'utf8')).toBe('held\n');
    expect(readFileSync(path.join(gitDir, 'index')).equals(index)).toBe(true);
    // No intent-to-add entry of the take's is left in the model's index.
    rmSync(path.join(gitDir, 'index.lock'));
    expect(workspace.git('status', '--porcelain')).toContain('?? new.txt');
  });

  // `git add -A` exits 128 on a nested repository with no commit (`git init sub`, by the model or
  // a build script): a take that failed on it failed every snapshot and, at finalize, ten tries
  // into AgentFailed; one that ignored the failure left every other new file out.
  it('takes the other new files beside a nested repository with no commit', async () => {
    workspace.write({ 'new.txt': 'fresh\n', 'sub/inner.txt': 'inner\n' });
    workspace.git('-C', 'sub', 'init', '-q');
    const taken = await takeDiff(sandbox, { timeoutMs: 30_000 });
    expect(taken.diff).toContain('diff --git a/new.txt b/new.txt\nnew file mode 100644\n');
  });

  it('takes nothing from a tree without changes', async () => {
    expect(await takeDiff(sandbox)).toEqual({
      diff: '',
      truncated: false,
      notUtf8: false,
    });
    expect(calls).toEqual(['bash']);
  });

  it('cuts a diff over 1 MiB at 1 MiB, reads the cut diff back whole and says it was cut, counting the part kept', async () => {
    const line = `${'x'.repeat(99)}\n`;
    workspace.write({ 'big.txt': line.repeat(15_000) }); // 1.5 MB of additions
    const taken = await takeSandboxDiff(sandbox);
    expect(taken.truncated).toBe(true);
    expect(Buffer.byteLength(taken.diff)).toBe(LIMITS.fullDiff);
    expect(taken.diff).toMatch(/^diff --git a\/big\.txt b\/big\.txt\n/);
    expect(
      taken.diff
        .split('\n')
        .slice(6, -1)
        .every((added) => added === `+${'x'.repeat(99)}`),
    ).toBe(true);
    // The lines the kept 1 MiB holds (the last one cut short), not the 15 000 of the whole change.
    const keptLines = taken.diff
      .split('\n')
      .slice(6)
      .filter((added) => added !== '');
    expect(taken).toMatchObject({ filesChanged: 1, insertions: keptLines.length, deletions: 0 });
    expect(taken.insertions).toBeLessThan(15_000);
    expect(calls).toEqual(['bash', 'read_file']);
  });

  it('takes UTF-8 text, accents and all, as it is, in one call', async () => {
    workspace.write({ 'a.txt': 'one\ntwo \u00e9\u2713\n' });
    const taken = await takeDiff(sandbox);
    expect(taken.diff).toContain('+two \u00e9\u2713\n');
    expect(taken.notUtf8).toBe(false);
    expect(calls).toEqual(['bash']);
  });

  it('marks the change of a Latin-1 file as not UTF-8, from the bytes in the log', async () => {
    workspace.write({ 'legacy.c': Buffer.from('/* caf\xe9 */\nint a = 1;\n', 'latin1') });
    workspace.git('add', '.');
    workspace.git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'legacy');
    calls = [];
    workspace.write({ 'legacy.c': Buffer.from('/* caf\xe9 */\nint a = 42;\n', 'latin1') });
    const taken = await takeDiff(sandbox);
    expect(taken.diff).toContain(' /* caf\uFFFD */\n-int a = 1;\n+int a = 42;\n');
    expect(taken.notUtf8).toBe(true);
    expect(calls).toEqual(['bash', 'read_file']);
  });

  it('marks a long change (read back from the log) holding a Shift-JIS file as not UTF-8', async () => {
    workspace.write({ 'big.txt': `${'x'.repeat(99)}\n`.repeat(1000), 'sjis.txt': Buffer.from([0x82, 0xa0, 0x0a]) });
    const taken = await takeDiff(sandbox);
    expect(taken.truncated).toBe(false);
    expect(taken.notUtf8).toBe(true);
  });

  it('keeps such a change for reading, and publish and continueFrom refuse it rather than apply other bytes', async () => {
    workspace.write({ 'new.txt': Buffer.from('na\xefve r\xe9sum\xe9\n', 'latin1') });
    const revision = workspace.git('rev-parse', 'HEAD').trim();
    const kept = { ...(await takeSandboxDiff(sandbox, revision)), configMap: 'first-diff', revision };
    const result = keptDiffResult(kept, 'Done.');
    expect(result.diffNotUtf8).toBe(true);

    const source = codingRunFixture({
      metadata: { name: 'first', uid: 'uid-first' },
      spec: { publish: { branch: 'chamvi/{run}', credentialsSecretRef: { name: 'push-token' } } },
      status: { phase: 'Succeeded', reason: 'Completed', result },
    });
    const parsed = { ...source, spec: codingRunSpec.parse(source.spec) } as ParsedCodingRun;
    await expect(startPublish({} as AgentDependencies, parsed, {} as RunState, kept, 'Done.')).rejects.toMatchObject({
      reason: REASONS.PublishFailed,
      message: expect.stringMatching(/not UTF-8 text .* pushed nothing/),
    });
    const continued = decideContinuation({
      namespace: source.metadata.namespace!,
      sourceName: 'first',
      repositoryUrl: source.spec.repository.url,
      source,
      diffConfigMap: buildDiffConfigMap(parsed, kept.diff) as DiffConfigMap,
    });
    expect(continued).toMatchObject({ ok: false, message: expect.stringMatching(/not UTF-8 text .* nothing was applied/) });
  });
});
