// workers/apply-diff.ts with real git: a source run's diff (written by a model, so hostile)
// applied in the worker's clone for spec.continueFrom. It must land inside the clone only.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyDiff, headRevision, readNamedFiles } from '../../operator/src/workers/apply-diff.ts';
import { launchHere, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { createRepository, git } from '../support/git-fixture.ts';

const MiB = 1024 * 1024;

/** launchHere, recording each command line. */
function recording(): { launch: Launch; launched: string[][] } {
  const launched: string[][] = [];
  return { launched, launch: (command, args, options) => (launched.push([command, ...args]), launchHere(command, args, options)) };
}

/** The git command of a launched command line: the first argument after git's `-c` settings. */
function gitCommandOf(line: string[]): string | undefined {
  let at = line.indexOf('git') + 1;
  while (line[at] === '-c') at += 2;
  return line[at];
}

/** The `ulimit -d` a launched command line sets (git-limits.ts withLimits), in bytes; undefined when none. */
const limitOf = (line: string[]) => (line[0] === '/bin/sh' && line[3] === 'chamvi-limits' ? Number(line[4]) * 1024 : undefined);

let base: string;
let repo: string;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'chamvi-apply-'));
  repo = join(base, 'repo');
  createRepository(repo, { 'README.md': 'Hello\n' });
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

const newFile = (path: string, line: string) =>
  `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+${line}\n`;

describe('applyDiff', () => {
  it('applies an edit and a new file, which stays untracked as in the source sandbox', async () => {
    const diff =
      'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n' +
      newFile('NOTES.md', 'notes');
    expect(await applyDiff(repo, diff)).toEqual({ applied: true });
    expect(readFileSync(join(repo, 'README.md'), 'utf8')).toBe('Hello, world\n');
    expect(readFileSync(join(repo, 'NOTES.md'), 'utf8')).toBe('notes\n');
    expect(git(['status', '--porcelain'], repo)).toBe(' M README.md\n?? NOTES.md\n');
  });

  it('refuses a diff that does not fit the tree, with git saying why, and changes nothing', async () => {
    const diff = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Goodbye\n+Hello\n';
    const outcome = await applyDiff(repo, diff);
    expect(outcome).toMatchObject({ applied: false, output: expect.stringContaining('patch does not apply') as unknown });
    expect(git(['status', '--porcelain'], repo)).toBe('');
  });

  it('refuses a binary patch, which the operator never takes, before git expands it', async () => {
    // Made by real git: a 32 MiB file of zeros is a patch of a few dozen KiB.
    const maker = join(base, 'maker');
    createRepository(maker, { 'README.md': 'Hello\n' });
    writeFileSync(join(maker, 'zeros.bin'), Buffer.alloc(32 * 1024 * 1024));
    git(['add', '-N', 'zeros.bin'], maker);
    const bomb = git(['diff', '--binary'], maker);
    expect(bomb).toContain('GIT binary patch');
    expect(bomb.length).toBeLessThan(256 * 1024);
    const outcome = await applyDiff(repo, bomb);
    expect(outcome).toEqual({ applied: false, output: expect.stringContaining('binary patch') as unknown });
    expect(existsSync(join(repo, 'zeros.bin'))).toBe(false);
  });

  it('refuses a copy, which writes the whole source for a few bytes of diff, before git writes it', async () => {
    writeFileSync(join(repo, 'big.txt'), 'x'.repeat(1024 * 1024));
    git(['add', 'big.txt'], repo);
    git(['commit', '-qm', 'big'], repo);
    const copies = Array.from(
      { length: 50 },
      (_, i) => `diff --git a/big.txt b/c${i}\nsimilarity index 100%\ncopy from big.txt\ncopy to c${i}\n`,
    );
    const bomb = copies.join('');
    expect(bomb.length).toBeLessThan(4096);
    const outcome = await applyDiff(repo, bomb);
    expect(outcome).toEqual({ applied: false, output: expect.stringContaining('copies a file') as unknown });
    expect(existsSync(join(repo, 'c0'))).toBe(false);
  });

  it('refuses two patches of one path, however the second spells it, before git holds a copy of the file for each', async () => {
    const patch = (from: string, to: string) =>
      `diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-${from}\n+${to}\n`;
    const quoted = `diff --git "a/README.md" "b/README.md"\n--- "a/README.md"\n+++ "b/README.md"\n@@ -1 +1 @@\n-Hello, world\n+Hi\n`;
    for (const twice of [patch('Hello', 'Hello, world') + patch('Hello, world', 'Hi'), patch('Hello', 'Hello, world') + quoted]) {
      const outcome = await applyDiff(repo, twice);
      expect(outcome).toEqual({ applied: false, output: expect.stringContaining('"README.md" in more than one patch') as unknown });
      expect(readFileSync(join(repo, 'README.md'), 'utf8')).toBe('Hello\n');
    }
  });

  it('applies a symlink made a file again, which git diff writes as its deletion and then its creation', async () => {
    const maker = join(base, 'maker');
    createRepository(maker, { 'README.md': 'Hello\n' });
    for (const dir of [maker, repo]) {
      symlinkSync('README.md', join(dir, 'link'));
      git(['add', 'link'], dir);
      git(['commit', '-qm', 'a link'], dir);
    }
    rmSync(join(maker, 'link'));
    writeFileSync(join(maker, 'link'), 'a file now\n');
    const diff = git(['-c', 'diff.renames=true', 'diff', '--no-color'], maker);
    expect(diff).toMatch(/deleted file mode 120000\n[\s\S]*new file mode 100644\n/);
    expect(await applyDiff(repo, diff)).toEqual({ applied: true });
    expect(lstatSync(join(repo, 'link')).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(repo, 'link'), 'utf8')).toBe('a file now\n');
  });

  it('refuses a type change whose path a third patch changes again, or a deletion and a creation of one path apart', async () => {
    const deletion =
      'diff --git a/README.md b/README.md\ndeleted file mode 100644\n--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-Hello\n';
    const creation = newFile('README.md', 'Hi');
    const edit = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hi\n+Hey\n';
    // The pair alone is taken; the control shows the refusals below are of the repeat, not of the pair.
    expect(await applyDiff(repo, deletion + creation)).toEqual({ applied: true });
    git(['checkout', '--', 'README.md'], repo);
    for (const diff of [deletion + creation + edit, deletion + newFile('NOTES.md', 'notes') + creation, creation + deletion]) {
      const outcome = await applyDiff(repo, diff);
      expect(outcome).toEqual({ applied: false, output: expect.stringContaining('"README.md" in more than one patch') as unknown });
      expect(readFileSync(join(repo, 'README.md'), 'utf8')).toBe('Hello\n');
    }
  });

  it('applies a line whose text holds a carriage return before "copy from": a hunk line, not a header', async () => {
    const diff = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+see\rcopy from the manual\n';
    expect(await applyDiff(repo, diff)).toEqual({ applied: true });
    expect(readFileSync(join(repo, 'README.md'), 'utf8')).toBe('see\rcopy from the manual\n');
  });

  it('refuses a path that climbs out of the clone', async () => {
    const outcome = await applyDiff(repo, newFile('../escaped.txt', 'out'));
    expect(outcome.applied).toBe(false);
    expect(existsSync(join(base, 'escaped.txt'))).toBe(false);
  });

  it('refuses to write through a symlink, even one the same diff creates', async () => {
    const outside = join(base, 'outside');
    const link = `diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+${outside}\n\\ No newline at end of file\n`;
    const outcome = await applyDiff(repo, link + newFile('link/planted.txt', 'planted'));
    expect(outcome.applied).toBe(false);
    expect(existsSync(join(outside, 'planted.txt'))).toBe(false);
  });

  it('refuses to write through a symlink the commit already holds', async () => {
    symlinkSync(base, join(repo, 'up'));
    git(['add', 'up'], repo);
    git(['commit', '-qm', 'a link'], repo);
    const outcome = await applyDiff(repo, newFile('up/planted.txt', 'planted'));
    expect(outcome.applied).toBe(false);
    expect(existsSync(join(base, 'planted.txt'))).toBe(false);
  });

  it('applies what real git writes of renames, deletions, new files, mode changes and odd names, as their headers name them', async () => {
    const maker = join(base, 'maker');
    createRepository(maker, { 'README.md': 'Hello\n', 'old name.txt': 'a\nb\nc\nd\n', 'gone.txt': 'bye\n', 'run.sh': 'echo\n' });
    createRepository(repo, { 'README.md': 'Hello\n', 'old name.txt': 'a\nb\nc\nd\n', 'gone.txt': 'bye\n', 'run.sh': 'echo\n' });
    git(['mv', 'old name.txt', 'new name.txt'], maker);
    git(['rm', '-q', 'gone.txt'], maker);
    git(['update-index', '--chmod=+x', 'run.sh'], maker);
    writeFileSync(join(maker, 'README.md'), 'Hello, world\n');
    writeFileSync(join(maker, 'ünï "cödé".md'), 'odd\n');
    git(['add', '-N', '.'], maker);
    const diff = git(['-c', 'diff.renames=true', 'diff', '--no-color', 'HEAD'], maker);
    expect(diff).toContain('rename from old name.txt');
    expect(diff).toContain('"b/\\303\\274n');
    expect(await applyDiff(repo, diff)).toEqual({ applied: true });
    expect(readFileSync(join(repo, 'new name.txt'), 'utf8')).toBe('a\nb\nc\nd\n');
    expect(readFileSync(join(repo, 'ünï "cödé".md'), 'utf8')).toBe('odd\n');
    expect(existsSync(join(repo, 'gone.txt'))).toBe(false);
  });

  it("refuses a diff whose headers name other files than git changes: a sandbox's diff.noprefix, a patch hidden after a hunk", async () => {
    // The model's `git config diff.noprefix true`: `diff --git examples/.github/x examples/.github/x`, which git applies to .github/x.
    const maker = join(base, 'maker');
    createRepository(maker, { 'README.md': 'Hello\n' });
    mkdirSync(join(maker, 'examples/.github/workflows'), { recursive: true });
    writeFileSync(join(maker, 'examples/.github/workflows/release.yml'), 'on: push\n');
    git(['add', '-N', '.'], maker);
    const noPrefix = git(['-c', 'diff.noprefix=true', 'diff', '--no-color'], maker);
    expect(noPrefix).toContain('diff --git examples/.github/workflows/release.yml examples/.github/workflows/release.yml');
    // Code in the sandbox writing into git's output: a traditional patch after README's hunk, which no header names.
    const hidden =
      'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n' +
      '--- /dev/null\n+++ b/.github/workflows/evil.yml\n@@ -0,0 +1 @@\n+on: push\n';
    for (const diff of [noPrefix, hidden]) {
      const outcome = await applyDiff(repo, diff);
      expect(outcome).toEqual({ applied: false, output: expect.stringContaining('what it shows is not what it changes') as unknown });
      expect(existsSync(join(repo, '.github'))).toBe(false);
      expect(readFileSync(join(repo, 'README.md'), 'utf8')).toBe('Hello\n');
    }
  });

  it("reads no attributes the repository holds where git's HOME config would be", async () => {
    // With HOME in the clone, git read $HOME/.config/git/attributes: the repository's own file.
    createRepository(repo, { 'README.md': 'Hello\n', '.config/git/attributes': '*.txt eol=crlf\n' });
    expect(await applyDiff(repo, newFile('notes.txt', 'plain'))).toEqual({ applied: true });
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('plain\n');
  });

  /** Commits `files` (path -> content) to the clone. */
  function commitFiles(files: Record<string, string | Buffer>): void {
    for (const [path, content] of Object.entries(files)) writeFileSync(join(repo, path), content);
    git(['add', '.'], repo);
    git(['commit', '-qm', 'large files'], repo);
  }
  /** 14 MiB of 100-byte lines, different in each file (so git stores, and reads, each apart). */
  const largeFile = (seed: number) =>
    `${seed}`.padEnd(99, '.') + '\n' + ('x'.repeat(99) + '\n').repeat(Math.floor((14 * 1024 * 1024) / 100) - 1);
  const rename = (from: string, to: string) =>
    `diff --git a/${from} b/${to}\nsimilarity index 100%\nrename from ${from}\nrename to ${to}\n`;

  it('refuses a diff whose patches read more than git may hold at once (renames read each source whole), before git runs; one of them applies', async () => {
    commitFiles(Object.fromEntries(Array.from({ length: 5 }, (_, index) => [`large${index}.txt`, largeFile(index)])));
    const renames = (count: number) =>
      Array.from({ length: count }, (_, index) => rename(`large${index}.txt`, `moved${index}.txt`)).join('');
    expect(renames(5).length).toBeLessThan(600);
    expect(await applyDiff(repo, renames(5))).toEqual({
      applied: false,
      output: expect.stringMatching(
        /read files of more than 70\.0 MiB in all, which git apply holds in memory at once, over the 64\.0 MiB/,
      ) as unknown,
    });
    // git keeps a renamed file as it read it, half again its size: four such renames needed 94 MiB (apply-budget.ts).
    expect(await applyDiff(repo, renames(2))).toEqual({
      applied: false,
      output: expect.stringMatching(/read 2 file\(s\) of 28\.0 MiB in all, .*about 75\.\d MiB, over the 64\.0 MiB/) as unknown,
    });
    expect(git(['status', '--porcelain'], repo)).toBe('');
    // Applied by git held to the 64 MiB limit.
    expect(await applyDiff(repo, renames(1))).toEqual({ applied: true });
    expect(existsSync(join(repo, 'moved0.txt'))).toBe(true);
  });

  it('refuses a one-line change of a file of empty lines, for the table of its lines git would hold, before git runs', async () => {
    // 8 MiB of newlines: git holds 16 bytes for each of its 8 Mi lines, in a table grown by half, while it patches it (measured: 161 MiB).
    commitFiles({ 'blank.txt': '\n'.repeat(8 * 1024 * 1024) });
    const lines = 8 * 1024 * 1024;
    const diff = `diff --git a/blank.txt b/blank.txt\n--- a/blank.txt\n+++ b/blank.txt\n@@ -${lines - 2},3 +${lines - 2},4 @@\n \n \n \n+end\n`;
    const outcome = await applyDiff(repo, diff);
    expect(outcome).toEqual({
      applied: false,
      output: expect.stringMatching(/with a table of each file's lines: about 2\d\d\.\d MiB/) as unknown,
    });
    expect(git(['status', '--porcelain'], repo)).toBe('');
  });

  it('refuses hunks git could look for at every line of a large file, before git searches; a hunk where it says in that file applies', async () => {
    // A million lines of one text: git looks for a hunk that is not at its line at every line, comparing the hunk's old lines each time.
    commitFiles({ 'same.txt': 'a\n'.repeat(1_000_000) });
    const floating =
      `diff --git a/same.txt b/same.txt\n--- a/same.txt\n+++ b/same.txt\n@@ -2,12002 +2,12002 @@\n` +
      ' a\n'.repeat(12_000) +
      '-a \n+b\n a\n';
    const started = Date.now();
    const outcome = await applyDiff(repo, floating);
    expect(outcome).toEqual({ applied: false, output: expect.stringMatching(/could make git apply compare \d+ lines/) as unknown });
    expect(Date.now() - started).toBeLessThan(5_000);
    const placed = 'diff --git a/same.txt b/same.txt\n--- a/same.txt\n+++ b/same.txt\n@@ -499999,3 +499999,3 @@\n a\n-a\n+b\n a\n';
    expect(await applyDiff(repo, placed)).toEqual({ applied: true });
  }, 60_000);

  it('reports a corrupt patch as not applying', async () => {
    expect(await applyDiff(repo, 'diff --git a/x b/x\n@@ nonsense\n')).toMatchObject({ applied: false });
  });
});

describe('readNamedFiles', () => {
  /** 200 files under 4 nested directories of 200-byte names: 170 KB of listing for a few KB of objects. */
  function longPaths(): string {
    const deep = ['a', 'b', 'c', 'd'].map((letter) => letter.repeat(200)).join('/');
    mkdirSync(join(repo, deep), { recursive: true });
    for (let i = 0; i < 200; i++) writeFileSync(join(repo, deep, `${i}`.padStart(200, 'f')), '');
    writeFileSync(join(repo, 'named.txt'), 'one\ntwo\n');
    git(['add', '.'], repo);
    git(['commit', '-qm', 'long paths'], repo);
    return git(['ls-tree', '-r', '-z', '--full-tree', 'HEAD'], repo);
  }

  it("stops reading the tree's listing past its bound: its size is the paths', not the files'", async () => {
    expect(longPaths().length).toBeGreaterThan(160 * 1024);
    const named = await readNamedFiles(repo, ['named.txt'], launchHere, MiB, 60_000, 64 * MiB, 64 * 1024);
    expect(named).toEqual({
      failed:
        "the listing of HEAD's tree grew past 64.0 KiB (65536 bytes) and was stopped: its paths are more than git's index holds " +
        'under the memory limit of git (config.maxGitMemoryBytes), which a repository of such paths needs raised',
    });
  });

  it('reads the named files of the same tree under the default bound, the memory limit (the control)', async () => {
    longPaths();
    const named = await readNamedFiles(repo, ['named.txt'], launchHere, MiB, 60_000, 64 * MiB);
    expect(named).toEqual({ named: { files: new Map([['named.txt', { bytes: 8, lines: 2 }]]), complete: true } });
  });
});

describe('headRevision', () => {
  it('is the full SHA of the checked-out commit', async () => {
    expect(await headRevision(repo)).toBe(git(['rev-parse', 'HEAD'], repo).trim());
    expect(await headRevision(repo)).toMatch(/^[0-9a-f]{40}$/);
  });

  it('reads it with git held to the memory limit: it reads the commit, which the repository made, whole', async () => {
    const { launch, launched } = recording();
    expect(await headRevision(repo, launch, 48 * MiB)).toBe(git(['rev-parse', 'HEAD'], repo).trim());
    expect(launched).toHaveLength(1);
    expect(limitOf(launched[0]!)).toBe(48 * MiB);
  });
});

describe('the memory limit (maxGitMemoryBytes)', () => {
  it('holds every git applyDiff starts to it, the apply itself too', async () => {
    const { launch, launched } = recording();
    const diff = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';
    expect(await applyDiff(repo, diff, launch, { maxGitMemoryBytes: 48 * MiB })).toEqual({ applied: true });
    expect(launched.map(gitCommandOf)).toEqual(['apply', 'apply', 'ls-tree', 'cat-file', 'apply']);
    for (const line of launched) expect(limitOf(line)).toBe(48 * MiB);
  });

  it('refuses a diff whose git apply runs out of its memory, saying so as the clone does, and changes nothing', async () => {
    // An 8 MiB file's one-line edit fits the estimate at 64 MiB (29 MiB), and needs 23 MiB; the
    // last apply is started under 16 MiB, as for a diff whose files the estimate did not foresee.
    writeFileSync(join(repo, 'big.txt'), ('x'.repeat(59) + '\n').repeat((8 * MiB) / 60));
    git(['add', '.'], repo);
    git(['commit', '-qm', 'big'], repo);
    const diff = `diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -1,2 +1,2 @@\n-${'x'.repeat(59)}\n+y\n ${'x'.repeat(59)}\n`;
    const starved: Launch = (command, args, options) =>
      launchHere(command, args.includes('--whitespace=nowarn') ? args.with(3, String(16 * 1024)) : args, options);
    expect(await applyDiff(repo, diff, starved)).toEqual({
      applied: false,
      output:
        "git apply needed more than the 64.0 MiB (67108864 bytes) of memory each git the operator runs may have, to hold the files the diff's patches read: " +
        'it was not applied; apply it outside the operator (kubectl codingrun diff prints it), or make the change in runs that each change less',
    });
    expect(git(['status', '--porcelain'], repo)).toBe('');
    expect(await applyDiff(repo, diff)).toEqual({ applied: true });
  });
});
