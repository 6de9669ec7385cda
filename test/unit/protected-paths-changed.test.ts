// Which paths of a run's diff spec.verify.protect covers (workers/protected-paths-changed.ts),
// read from git's own two lists of its patches (workers/diff-patch-lists.ts, real git): the
// diff is taken after the check, from a sandbox whose code ran meanwhile, and a change of a
// protected path there was kept and published as graded. Both sides of a rename count, names
// with newlines and quotes are read as git reads them, and a patch git reads but the headers
// do not name (a traditional patch written after a hunk) counts too.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listDiffPatches, type DiffPatchLists } from '../../operator/src/workers/diff-patch-lists.ts';
import { protectedChangeFailure, protectedPathsChanged, shownPath } from '../../operator/src/workers/protected-paths-changed.ts';

const work = mkdtempSync(join(tmpdir(), 'chamvi-protected-changed-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let repositories = 0;

const git = (dir: string, args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.test', ...args], { cwd: dir, encoding: 'utf8' });

/** The diff `git diff` makes (renames on, as take-diff.ts pins them) from `before` to `after`: file contents, null to delete. */
function diffOf(before: Record<string, string>, after: Record<string, string | null>, renames: Array<[string, string]> = []): string {
  const dir = join(work, `repo-${++repositories}`);
  mkdirSync(dir);
  git(dir, ['init', '-q']);
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  };
  for (const [path, text] of Object.entries(before)) write(path, text);
  git(dir, ['add', '-A']);
  git(dir, ['commit', '-qm', 'start']);
  for (const [from, to] of renames) {
    mkdirSync(dirname(join(dir, to)), { recursive: true });
    git(dir, ['mv', from, to]);
  }
  for (const [path, text] of Object.entries(after)) {
    if (text === null) rmSync(join(dir, path));
    else write(path, text);
  }
  git(dir, ['add', '-A', '--intent-to-add', '.']);
  return git(dir, ['-c', 'diff.renames=true', 'diff', '--no-color', '--src-prefix=a/', '--dst-prefix=b/', 'HEAD']);
}

async function listed(diff: string): Promise<DiffPatchLists> {
  const lists = await listDiffPatches(diff);
  if ('failed' in lists) throw new Error(lists.failed);
  return lists;
}

const changed = async (protect: string[], diff: string) => protectedPathsChanged(protect, diff, await listed(diff));

describe('protectedPathsChanged', () => {
  it('names an edited protected file, and nothing for a diff that leaves them alone', async () => {
    const diff = diffOf({ 'src/a.js': 'a\n', 'test/a.test.js': 't\n' }, { 'src/a.js': 'b\n', 'test/a.test.js': 'skip\n' });
    expect(await changed(['test'], diff)).toEqual(['test/a.test.js']);
    expect(await changed(['package.json', 'test/**/*.snap'], diff)).toEqual([]);
    expect(await changed([], diff)).toEqual([]);
  });

  it('names a protected file the diff adds or deletes', async () => {
    const diff = diffOf({ 'test/old.test.js': 't\n' }, { 'test/old.test.js': null, 'test/new.test.js': 'n\n' });
    expect(await changed(['test'], diff)).toEqual(['test/new.test.js', 'test/old.test.js']);
  });

  it('names the source of a rename out of a protected directory, which git lists only reversed', async () => {
    const diff = diffOf({ 'test/a.test.js': 'same\n'.repeat(20) }, {}, [['test/a.test.js', 'src/moved.js']]);
    // The control: a pure rename, which the forward list names by its target alone.
    const lists = await listed(diff);
    expect(lists.forward).toBe('0\t0\tsrc/moved.js\0');
    expect(protectedPathsChanged(['test'], diff, lists)).toEqual(['test/a.test.js']);
    // git's lists alone, no header read: the reversed one names the source.
    expect(protectedPathsChanged(['test'], '', lists)).toEqual(['test/a.test.js']);
  });

  it('names the target of a rename into a protected directory', async () => {
    const diff = diffOf({ 'src/a.js': 'same\n'.repeat(20) }, {}, [['src/a.js', 'test/a.test.js']]);
    expect(await changed(['test'], diff)).toEqual(['test/a.test.js']);
    expect(protectedPathsChanged(['test'], '', await listed(diff))).toEqual(['test/a.test.js']);
  });

  it('reads a name with a newline and quotes as the one name git reads, not as lines', async () => {
    const hostile = 'test/we"ird\nname.js';
    // Outside `test` though a line of it reads `test/b.js`: not protected.
    const decoy = 'a\ntest/b.js';
    const diff = diffOf({ 'README.md': 'r\n' }, { [hostile]: 'x\n', [decoy]: 'y\n' });
    expect(diff).toContain('"b/test/we\\"ird\\nname.js"');
    expect(await changed(['test'], diff)).toEqual([hostile]);
    expect(protectedPathsChanged(['test'], '', await listed(diff))).toEqual([hostile]);
    expect(await changed(['test/b.js'], diff)).toEqual([]);
  });

  it("names a protected file of a patch git reads after a hunk, which no 'diff --git' header names", async () => {
    const shown = diffOf({ 'src/a.js': 'a\n' }, { 'src/a.js': 'b\n' });
    const hidden = '--- a/test/a.test.js\n+++ b/test/a.test.js\n@@ -1 +1 @@\n-t\n+skip\n';
    const diff = shown + hidden;
    // The control: the headers alone say nothing of it.
    expect(protectedPathsChanged(['test'], diff, undefined)).toEqual([]);
    expect(await changed(['test'], diff)).toEqual(['test/a.test.js']);
  });

  it("judges the headers alone when git's lists are not at hand (a diff cut at the kept bound)", () => {
    const cut = 'diff --git a/test/a.test.js b/test/a.test.js\n--- a/test/a.test.js\n+++ b/test/a.test.js\n@@ -1,3 +1,3 @@\n-t';
    expect(protectedPathsChanged(['test'], cut, undefined)).toEqual(['test/a.test.js']);
  });
});

describe('protectedChangeFailure', () => {
  it('names the first path on one line, quoted, and counts the others', () => {
    const message = protectedChangeFailure(['test/we"ird\nname.js', 'test/b.js']);
    expect(message).not.toContain('\n');
    expect(message).toContain(`the diff changes ${shownPath('test/we"ird\nname.js')} (and 1 more)`);
    expect(shownPath('test/we"ird\nname.js')).toBe('"test/we\\"ird^Jname.js"');
    expect(message).toMatch(/^Verification failed: .*; the diff is kept\./);
  });
});
