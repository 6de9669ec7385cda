// workers/publish-git.ts with real git, in a clone whose origin is a bare repository on disk:
// the lookup names the remote's default branch and the branch's head (and refuses, as not the
// operator's, a head too large to be its commit or for git to read within its memory limit),
// and the commit refuses a binary patch (which the operator never takes from a sandbox) before
// git expands it.
import { LS_REMOTE_MAX_BYTES } from '../../operator/src/workers/git-limits.ts';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import type { RunFailure } from '../../operator/src/api/run-failure.ts';
import { decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import {
  commitDiff,
  lookUpRemote,
  OPERATOR_COMMIT_MAX_BYTES,
  pushBranch,
  type PublishClone,
} from '../../operator/src/workers/publish-git.ts';
import { launchHere, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { repositoryUrlParts } from '../../operator/src/reconcile/canonical-repository-url.ts';
import { gitEnvironment } from '../../operator/src/workers/git-clone.ts';
import { createBareRepository, createRepository, git } from '../support/git-fixture.ts';
import { startGitHttpServer } from '../support/git-http-server.ts';

/** The git command of a launched command line: the first argument after git's `-c` settings. */
function gitCommandOf(line: string[]): string | undefined {
  let at = line.indexOf('git') + 1;
  while (line[at] === '-c') at += 2;
  return line[at];
}

/**
 * Adds `count` refs refs/heads/zz<i>/<3.5 KB>/HEAD at main's commit to the bare repository,
 * written into packed-refs as anyone who may push could make them (git packs refs on the
 * server; loose files of such names would take the test minutes). They sort after main.
 */
function addLongRefs(bare: string, count: number): void {
  git(['pack-refs', '--all', '--prune'], bare);
  const main = git(['rev-parse', 'main'], bare).trim();
  const segment = 'x'.repeat(200);
  const long = Array.from({ length: 17 }, () => segment).join('/');
  const file = join(bare, 'packed-refs');
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'));
  for (let i = 0; i < count; i++) lines.push(`${main} refs/heads/zz${i}/${long}/HEAD`);
  const name = (line: string) => line.slice(line.indexOf(' ') + 1);
  lines.sort((a, b) => (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0));
  writeFileSync(file, `# pack-refs with: peeled fully-peeled sorted \n${lines.join('\n')}\n`);
}

let base: string;
let clone: PublishClone;
const author = { name: 'chamvi test', email: 'chamvi@example.test' };
const date = '2026-12-05T00:00:00Z';
const TOKEN = 'publish-git-test-token';
const TRAILERS = 'Chamvi-Run: a/b\nChamvi-Run-Branch: chamvi/b\nChamvi-Run-Uid: u';
const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'chamvi-publish-git-'));
  const origin = createBareRepository(base);
  const dir = join(base, 'clone');
  git(['clone', '-q', origin, dir], base);
  clone = {
    dir,
    env: { PATH: process.env.PATH, HOME: base, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    token: undefined,
    maxFetchBytes: 64 * 1024 * 1024,
  };
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('publish git', () => {
  it("names the remote's default branch, and a branch's head with its message only when that head is not the run's commit", async () => {
    const commit = await commitDiff(clone, {
      diff: DIFF,
      message: 'Greet\n\nChamvi-Run: a/b\nChamvi-Run-Branch: chamvi/b\nChamvi-Run-Uid: u\n',
      author,
      date,
    });
    expect(await lookUpRemote(clone, 'chamvi/b', commit)).toEqual({ branch: undefined, defaultBranch: 'main', revisionRef: undefined });
    await pushBranch(clone, commit, 'chamvi/b');
    expect(await lookUpRemote(clone, 'chamvi/b', commit)).toEqual({
      branch: { commit, message: '' },
      defaultBranch: 'main',
      revisionRef: undefined,
    });
    expect(await lookUpRemote(clone, 'chamvi/b', 'f'.repeat(40))).toEqual({
      branch: { commit, message: 'Greet\n\nChamvi-Run: a/b\nChamvi-Run-Branch: chamvi/b\nChamvi-Run-Uid: u\n\n' },
      defaultBranch: 'main',
      revisionRef: undefined,
    });
  });

  it('reads the message of the very commit it listed: a branch moved between the two reads is read again, not taken for the other', async () => {
    const maker = join(base, 'mover');
    git(['clone', '-q', git(['remote', 'get-url', 'origin'], clone.dir).trim(), maker], base);
    const commitAs = (message: string) => {
      git(['-c', `user.name=${author.name}`, '-c', `user.email=${author.email}`, 'commit', '-q', '--allow-empty', '-m', message], maker);
      git(['push', '-q', '-f', 'origin', 'HEAD:refs/heads/chamvi/b'], maker);
    };
    commitAs('A human commit');
    // Right after the listing, the branch moves to a commit that carries this run's trailers.
    const launch: Launch = (command, args, options) => {
      const started = launchHere(command, args, options);
      if (args.includes('ls-remote')) (started as ChildProcess).once('exit', () => commitAs(`Mine\n\n${TRAILERS}`));
      return started;
    };
    await expect(lookUpRemote({ ...clone, launch }, 'chamvi/b', 'f'.repeat(40))).rejects.toThrow(
      /branch chamvi\/b moved while it was read/,
    );
  });

  /** The bare repository the clone's origin is, on disk. */
  const originDir = () => git(['remote', 'get-url', 'origin'], clone.dir).trim().slice('file://'.length);

  it('reads the whole listing to tell the default branch and the branch, past a megabyte of refs ending in /HEAD that sort after them', async () => {
    // git lists every ref ending in /HEAD for the pattern HEAD: these came after HEAD's lines
    // and main's, and the last megabyte kept of the listing held none of them, so main was
    // taken for a branch to create, pushed without a lease: a fast-forward onto main.
    addLongRefs(originDir(), 300);
    const main = git(['rev-parse', 'main'], originDir()).trim();
    const commit = await commitDiff(clone, { diff: DIFF, message: 'Greet\n', author, date });
    expect(git(['ls-remote', '--symref', '--', 'origin', 'HEAD', 'refs/heads/main'], clone.dir).length).toBeGreaterThan(1_000_000);
    expect(await lookUpRemote(clone, 'main', commit)).toEqual({
      branch: { commit: main, message: 'initial\n\n' },
      defaultBranch: 'main',
      revisionRef: undefined,
    });
  });

  it('fails PublishFailed, pushing nothing, when the listing is larger than it reads whole', async () => {
    addLongRefs(originDir(), Math.ceil(LS_REMOTE_MAX_BYTES / 3500) + 50);
    const commit = await commitDiff(clone, { diff: DIFF, message: 'Greet\n', author, date });
    const error = await lookUpRemote(clone, 'main', commit).catch((e: unknown) => e);
    expect(fate(error)).toMatchObject({ action: 'fail', reason: 'PublishFailed' });
    expect((error as RunFailure).message).toMatch(
      /^Publishing failed: git ls-remote printed more than 8\.0 MiB .* and was stopped \(the remote has so many refs whose names end in \/HEAD or as branch main that their list is more than the operator reads/,
    );
  });

  it('takes only the exact names from the listing: refs ending as HEAD or as the branch do not stand for them', async () => {
    // Anyone who may push can make refs/heads/x/refs/heads/chamvi/b, which the pattern for chamvi/b matches too.
    const main = git(['rev-parse', 'main'], originDir()).trim();
    git(['update-ref', 'refs/heads/x/refs/heads/chamvi/b', main], originDir());
    git(['symbolic-ref', 'refs/heads/y/HEAD', 'refs/heads/x/refs/heads/chamvi/b'], originDir());
    expect(await lookUpRemote(clone, 'chamvi/b', 'f'.repeat(40))).toEqual({
      branch: undefined,
      defaultBranch: 'main',
      revisionRef: undefined,
    });
  });

  it('names the ref a revision stands for, as the clone resolves it: a tag before a branch of its name, a commit id never', async () => {
    const main = git(['rev-parse', 'main'], originDir()).trim();
    git(['update-ref', 'refs/heads/develop', main], originDir());
    git(['update-ref', 'refs/tags/v1.2.0', main], originDir());
    git(['update-ref', 'refs/heads/both', main], originDir());
    git(['update-ref', 'refs/tags/both', main], originDir());
    const revisionRef = async (revision: string) => (await lookUpRemote(clone, 'chamvi/b', 'f'.repeat(40), revision)).revisionRef;
    expect(await revisionRef('develop')).toBe('refs/heads/develop');
    expect(await revisionRef('refs/heads/develop')).toBe('refs/heads/develop');
    expect(await revisionRef('heads/develop')).toBe('refs/heads/develop');
    expect(await revisionRef('v1.2.0')).toBe('refs/tags/v1.2.0');
    expect(await revisionRef('both')).toBe('refs/tags/both');
    expect(await revisionRef('gone')).toBeUndefined();
    expect(await revisionRef(main)).toBeUndefined();
  });

  it('refuses to create a branch that exists by the push, though the push would fast-forward it', async () => {
    const commit = await commitDiff(clone, { diff: DIFF, message: 'Greet\n', author, date });
    expect((await lookUpRemote(clone, 'chamvi/b', commit)).branch).toBeUndefined();
    // Made after the lookup, at the commit the run's commit is on: a plain push would move it.
    const main = git(['rev-parse', 'main'], originDir()).trim();
    git(['update-ref', 'refs/heads/chamvi/b', main], originDir());
    const error = await pushBranch(clone, commit, 'chamvi/b').catch((e: unknown) => e);
    expect(fate(error)).toMatchObject({ action: 'fail', reason: 'PublishFailed' });
    expect((error as RunFailure).message).toMatch(
      /^Publishing failed: git push failed: .*stale info.*\(creating branch chamvi\/b, which the lookup did not find/s,
    );
    expect(git(['rev-parse', 'refs/heads/chamvi/b'], originDir()).trim()).toBe(main);
    // The same push onto main, which a lookup cut short once took for a branch to create.
    await expect(pushBranch(clone, commit, 'main')).rejects.toThrow(/stale info/);
    expect(git(['rev-parse', 'main'], originDir()).trim()).toBe(main);
    // The control: a branch that does not exist is created.
    await pushBranch(clone, commit, 'chamvi/c');
    expect(git(['rev-parse', 'refs/heads/chamvi/c'], originDir()).trim()).toBe(commit);
  });

  /** Pushes, as someone who may push, a commit with this message to chamvi/b (commit-tree: git's message cleanup would take seconds). */
  function pushHeadWithMessage(message: string): void {
    const maker = join(base, 'maker');
    if (!existsSync(maker)) git(['clone', '-q', git(['remote', 'get-url', 'origin'], clone.dir).trim(), maker], base);
    const file = join(base, 'message');
    writeFileSync(file, message);
    const commit = git(['commit-tree', 'HEAD^{tree}', '-p', 'HEAD', '-F', file], maker).trim();
    git(['push', '-q', '-f', 'origin', `${commit}:refs/heads/chamvi/b`], maker);
  }

  /** What the publish job does with the lookup's failure: the run's end, or a retry. */
  const fate = (error: unknown) => decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 });

  it("refuses a branch whose head is larger than any commit the operator makes, at once, naming nothing of it but its id (a 2 MiB message ending in this run's trailers)", async () => {
    // Made to pass for the operator's: a branch named as the run will publish, its head's last
    // lines this run's trailers. Read whole, the message would let the run move the branch; cut
    // to git's output bound, it was taken for a branch that moved while it was read, and retried.
    pushHeadWithMessage(`${'y'.repeat(2 * 1024 * 1024)}

${TRAILERS}
`);
    const error = await lookUpRemote(clone, 'chamvi/b', 'f'.repeat(40)).catch((e: unknown) => e);
    expect(fate(error)).toMatchObject({ action: 'fail', reason: 'PublishFailed' });
    const { message } = error as RunFailure;
    expect(message).toMatch(
      /^Publishing failed: branch chamvi\/b already exists at [0-9a-f]{12}, whose head is a commit of 2\.0 MiB \(\d+ bytes\), larger than any the operator makes \(64\.0 KiB \(65536 bytes\)\), so the operator did not make it; it is left alone: set spec\.publish\.branch to a new branch, or delete that one$/,
    );
    expect(message).not.toContain('yyyy');
  });

  it('reads the message of a head just under the bound on its commits (the control: the bound refuses only what is larger)', async () => {
    const body = 'y'.repeat(OPERATOR_COMMIT_MAX_BYTES - 1024);
    pushHeadWithMessage(`${body}

${TRAILERS}
`);
    expect((await lookUpRemote(clone, 'chamvi/b', 'f'.repeat(40))).branch?.message).toBe(`${body}

${TRAILERS}

`);
  });

  it("stops the fetch of a branch head git would need more than its memory limit to read, at once and as not the operator's", async () => {
    // 40 MiB of one character: a pack of a few dozen KiB, which git's index-pack reads whole to
    // hash it. Served over smart HTTP, so that the server's git runs outside the operator's limit.
    pushHeadWithMessage(`${'0'.repeat(40 * 1024 * 1024)}\n`);
    const server = await startGitHttpServer(join(base, 'git'), TOKEN);
    try {
      const url = `${server.origin}/hello.git`;
      git(['remote', 'set-url', 'origin', url], clone.dir);
      const overHttp = { ...clone, token: TOKEN, env: await gitEnvironment(repositoryUrlParts(url)!, TOKEN, base) };
      const started = Date.now();
      const error = await lookUpRemote({ ...overHttp, maxGitMemoryBytes: 24 * 1024 * 1024 }, 'chamvi/b', 'f'.repeat(40)).catch(
        (e: unknown) => e,
      );
      expect(fate(error)).toMatchObject({ action: 'fail', reason: 'PublishFailed' });
      expect((error as RunFailure).message).toMatch(
        /^Publishing failed: branch chamvi\/b already exists at [0-9a-f]{12}, whose head \(or what the server sent with it\) holds an object too large to read: git fetch needed more than the 24\.0 MiB \(25165824 bytes\) of memory each git the operator runs may have, so the operator did not make it; it is left alone/,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      // The control: under the default limit git reads it, and the lookup refuses it by its size.
      await expect(lookUpRemote(overHttp, 'chamvi/b', 'f'.repeat(40))).rejects.toThrow(/whose head is a commit of 40\.0 MiB/);
    } finally {
      await server.close();
    }
    // Making and serving 40 MiB twice takes seconds on a loaded machine: more than the default 5 s.
  }, 30_000);

  it("stops the fetch of a branch's head at maxFetchBytes where the server sends the whole tree", async () => {
    // A branch someone filled: its head holds 3 MiB that does not compress. This origin
    // (file://, served by git's upload-pack without uploadpack.allowFilter) ignores --filter,
    // as a server may, and sends the tree with the commit.
    const maker = join(base, 'maker');
    git(['clone', '-q', git(['remote', 'get-url', 'origin'], clone.dir).trim(), maker], base);
    writeFileSync(join(maker, 'noise.bin'), randomBytes(3 * 1024 * 1024));
    git(['add', 'noise.bin'], maker);
    git(['-c', `user.name=${author.name}`, '-c', `user.email=${author.email}`, 'commit', '-qm', 'Fill'], maker);
    git(['push', '-q', 'origin', 'HEAD:refs/heads/chamvi/b'], maker);
    await expect(lookUpRemote({ ...clone, maxFetchBytes: 1024 * 1024 }, 'chamvi/b', 'f'.repeat(40))).rejects.toThrow(
      /git fetch failed: .* \(fetching the head of branch chamvi\/b to read its commit message; a download over 1\.0 MiB .* is stopped\)$/s,
    );
    // The control: under the default bound the same lookup reads the message.
    expect((await lookUpRemote(clone, 'chamvi/b', 'f'.repeat(40))).branch?.message).toBe('Fill\n\n');
  });

  it("moves a branch without fetching the objects of its old head that the lookup's filtered fetch left out", async () => {
    // A server that honours the filter: the lookup then fetches the head commit alone, and its
    // tree and files stay on the server. The old head holds 3 MiB at README.md, which the run's
    // commit changes too: a thin pack's base, which the push fetched on demand, unbounded.
    const origin = git(['remote', 'get-url', 'origin'], clone.dir).trim();
    git(['config', 'uploadpack.allowFilter', 'true'], origin.slice('file://'.length));
    const maker = join(base, 'maker');
    git(['clone', '-q', origin, maker], base);
    writeFileSync(join(maker, 'README.md'), randomBytes(3 * 1024 * 1024).toString('base64'));
    git(['-c', `user.name=${author.name}`, '-c', `user.email=${author.email}`, 'commit', '-qam', `Mine\n\n${TRAILERS}`], maker);
    git(['push', '-q', 'origin', 'HEAD:refs/heads/chamvi/b'], maker);
    const objectBytes = () =>
      readdirSync(join(clone.dir, '.git/objects'), { recursive: true, encoding: 'utf8' })
        .map((path) => statSync(join(clone.dir, '.git/objects', path)))
        .reduce((sum, stat) => sum + (stat.isFile() ? stat.size : 0), 0);
    const commit = await commitDiff(clone, { diff: DIFF, message: 'Greet\n', author, date });
    const { branch } = await lookUpRemote(clone, 'chamvi/b', commit);
    expect(branch?.message).toBe(`Mine\n\n${TRAILERS}\n\n`);
    await pushBranch(clone, commit, 'chamvi/b', branch!.commit);
    expect(git(['ls-remote', origin, 'refs/heads/chamvi/b'], base)).toBe(`${commit}\trefs/heads/chamvi/b\n`);
    expect(objectBytes()).toBeLessThan(256 * 1024);
  });

  it("fails PublishFailed naming only the code when git cannot start, never the environment's value (a NUL in the token)", async () => {
    // Node's refusal quotes the value: the run's status read "git could not start: ... Received '<token>'".
    const canary = 'CANARY-KEY-MATERIAL-93b1';
    const refused = await commitDiff(
      { ...clone, env: { ...clone.env, CHAMVI_GIT_TOKEN: `PKCS12-ish\0${canary}` } },
      { diff: DIFF, message: 'x\n', author, date },
    ).catch((error: unknown) => error);
    expect(decideJobFailure(refused, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'fail',
      reason: 'PublishFailed',
    });
    expect((refused as Error).message).toBe('Publishing failed: git apply could not start (ERR_INVALID_ARG_VALUE)');
    expect((refused as Error).message).not.toContain(canary);
  });

  it('refuses to commit a binary patch, before git expands it', async () => {
    const maker = join(base, 'maker');
    createRepository(maker);
    writeFileSync(join(maker, 'zeros.bin'), Buffer.alloc(32 * 1024 * 1024));
    git(['add', '-N', 'zeros.bin'], maker);
    const bomb = git(['diff', '--binary'], maker);
    await expect(commitDiff(clone, { diff: bomb, message: 'x\n', author, date })).rejects.toThrow(/binary patch/);
    expect(existsSync(join(clone.dir, 'zeros.bin'))).toBe(false);
  });

  it('refuses to commit a change git would need more memory to apply than the operator lets it take, before git runs', async () => {
    // A rename reads its source whole, and git keeps a 16-byte entry per line of a file it patches, in a table grown by half: 8 MiB of newlines, over 200 MiB.
    writeFileSync(join(clone.dir, 'blank.txt'), '\n'.repeat(8 * 1024 * 1024));
    git(['add', 'blank.txt'], clone.dir);
    git(['commit', '-qm', 'blank lines'], clone.dir);
    const rename = 'diff --git a/blank.txt b/moved.txt\nsimilarity index 100%\nrename from blank.txt\nrename to moved.txt\n';
    await expect(commitDiff(clone, { diff: rename, message: 'x\n', author, date })).rejects.toThrow(
      /Publishing failed: the diff's patches read 1 file\(s\) of 8\.0 MiB in all, which git apply holds in memory at once with a table of each file's lines/,
    );
    expect(git(['status', '--porcelain'], clone.dir)).toBe('');
  });

  it('commits with every git held to the memory limit, git apply too', async () => {
    const launched: string[][] = [];
    const launch: Launch = (command, args, options) => (launched.push([command, ...args]), launchHere(command, args, options));
    const commit = await commitDiff(
      { ...clone, launch, maxGitMemoryBytes: 48 * 1024 * 1024 },
      { diff: DIFF, message: 'Greet\n', author, date },
    );
    expect(git(['show', '--format=', commit], clone.dir)).toContain('+Hello, world');
    expect(launched.map(gitCommandOf)).toEqual(['apply', 'apply', 'ls-tree', 'cat-file', 'apply', 'write-tree', 'commit-tree']);
    for (const line of launched) expect(line.slice(0, 1).concat(line.slice(3, 5))).toEqual(['/bin/sh', 'chamvi-limits', String(48 * 1024)]);
  });

  it('fails PublishFailed, at once and saying so as the clone does, when git apply runs out of its memory', async () => {
    // An 8 MiB file's one-line edit fits the estimate at 64 MiB (29 MiB) and needs 19 MiB; the
    // apply is started under 12 MiB, as for a diff whose files the estimate did not foresee.
    writeFileSync(join(clone.dir, 'big.txt'), ('x'.repeat(59) + '\n').repeat((8 * 1024 * 1024) / 60));
    git(['add', 'big.txt'], clone.dir);
    git(['commit', '-qm', 'big'], clone.dir);
    const diff = `diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -1,2 +1,2 @@\n-${'x'.repeat(59)}\n+y\n ${'x'.repeat(59)}\n`;
    const starved: Launch = (command, args, options) =>
      launchHere(command, args.includes('--index') ? args.with(3, String(12 * 1024)) : args, options);
    const error = await commitDiff({ ...clone, launch: starved }, { diff, message: 'x\n', author, date }).catch((e: unknown) => e);
    expect(decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'fail',
      reason: 'PublishFailed',
    });
    expect((error as RunFailure).message).toBe(
      "Publishing failed: git apply needed more than the 64.0 MiB (67108864 bytes) of memory each git the operator runs may have, to hold the files the diff's patches read: " +
        'it was not applied; apply it outside the operator (kubectl codingrun diff prints it), or make the change in runs that each change less',
    );
    expect(git(['status', '--porcelain'], clone.dir)).toBe('');
    expect(git(['show', '--format=', await commitDiff(clone, { diff, message: 'x\n', author, date })], clone.dir)).toContain('+y');
  });

  it('refuses to commit a copy, before git writes the copied file', async () => {
    const bomb = 'diff --git a/README.md b/c0\nsimilarity index 100%\ncopy from README.md\ncopy to c0\n';
    await expect(commitDiff(clone, { diff: bomb, message: 'x\n', author, date })).rejects.toThrow(/copies a file/);
    expect(existsSync(join(clone.dir, 'c0'))).toBe(false);
  });

  it('refuses to commit two patches of one path', async () => {
    const second = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello, world\n+Hi\n';
    await expect(commitDiff(clone, { diff: DIFF + second, message: 'x\n', author, date })).rejects.toThrow(/in more than one patch/);
  });

  /** What git diff writes when README.md becomes a symlink to HELLO.md: its deletion, then its creation, two patches of one path. */
  function fileMadeSymlink(): string {
    const maker = join(base, 'maker');
    git(['clone', '-q', git(['remote', 'get-url', 'origin'], clone.dir).trim(), maker], base);
    rmSync(join(maker, 'README.md'));
    symlinkSync('HELLO.md', join(maker, 'README.md'));
    const diff = git(['-c', 'diff.renames=true', 'diff', '--no-color'], maker);
    expect(diff).toMatch(
      /^diff --git a\/README.md b\/README.md\ndeleted file mode 100644\n[\s\S]*^diff --git a\/README.md b\/README.md\nnew file mode 120000\n/m,
    );
    return diff;
  }

  it('commits a file made a symlink, which git diff writes as its deletion and then its creation', async () => {
    const commit = await commitDiff(clone, { diff: fileMadeSymlink(), message: 'Link\n', author, date });
    expect(git(['ls-tree', commit, 'README.md'], clone.dir)).toMatch(/^120000 blob [0-9a-f]+\tREADME.md\n$/);
    expect(git(['cat-file', 'blob', `${commit}:README.md`], clone.dir)).toBe('HELLO.md');
  });

  it('refuses to commit a type change whose path a third patch changes again', async () => {
    const third =
      'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-HELLO.md\n\\ No newline at end of file\n+OTHER.md\n\\ No newline at end of file\n';
    await expect(commitDiff(clone, { diff: fileMadeSymlink() + third, message: 'x\n', author, date })).rejects.toThrow(
      /"README.md" in more than one patch/,
    );
  });

  it('refuses to commit a file other than the one its header names: the approver approves the files that change', async () => {
    // As a sandbox with `git config diff.noprefix true` prints a new workflow under examples/: git applies it to .github/.
    const noPrefix =
      'diff --git examples/.github/workflows/release.yml examples/.github/workflows/release.yml\nnew file mode 100644\n' +
      '--- /dev/null\n+++ examples/.github/workflows/release.yml\n@@ -0,0 +1 @@\n+on: push\n';
    await expect(commitDiff(clone, { diff: noPrefix, message: 'x\n', author, date })).rejects.toThrow(
      /header names "examples\/.github\/workflows\/release.yml" but git would change ".github\/workflows\/release.yml"/,
    );
    expect(git(['status', '--porcelain'], clone.dir)).toBe('');
  });

  it('commits a rename, which moves its source and writes no more than it removes', async () => {
    const rename = 'diff --git a/README.md b/HELLO.md\nsimilarity index 100%\nrename from README.md\nrename to HELLO.md\n';
    const commit = await commitDiff(clone, { diff: rename, message: 'Rename\n', author, date });
    expect(git(['ls-tree', '--name-only', commit], clone.dir)).toBe('HELLO.md\n');
    // A second rename of the same source is git's to refuse: no copy by way of renames.
    const twice = rename + rename.replaceAll('HELLO.md', 'AGAIN.md');
    await expect(commitDiff(clone, { diff: twice, message: 'Twice\n', author, date })).rejects.toThrow();
  });
});
