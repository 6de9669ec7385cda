// The clone cache (workers/clone-cache.ts) and how a run finds its commit (git-clone.ts
// remoteCommit), with real git against a loopback smart-HTTP server that serves only the token:
// - security: a kept tree is found only through the remote, asked with the run's credential:
//   no credential or a wrong one is refused as a fetch would be, and a commit id that is no
//   ref's tip is not named (a server may hide refs from some users);
// - a kept archive is the clone's own bytes, checked against the limits as they are now, and
//   evicted least recently used first, without pulling it from a run that holds it;
// - security: only the archive of a clone that holds no ref is kept (a ref there, such as a
//   refs/replace/* that makes git show another tree under the commit id, would reach other
//   namespaces' runs), and the check fails closed;
// - security: a clone of an annotated tag holds the tag object (name, tagger, message); it is
//   kept under that object's id, and handed out only to a run the remote names that same tag
//   object for: not to a run of the commit by branch or id, nor through a re-made tag.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { isRepositoryAllowed, type CheckedRepositoryUrl } from '../../operator/src/reconcile/allow-repo.ts';
import { CloneCache, refFreeArchive, type RefFreeArchive } from '../../operator/src/workers/clone-cache.ts';
import { cloneMeasured, remoteCommit } from '../../operator/src/workers/git-clone.ts';
import { launchHere, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.ts';

const TOKEN = 'clone-cache-test-token-4f1d';
const LIMITS = { maxCheckoutBytes: 1024 ** 3, maxCheckoutFiles: 250_000 };
const scratch = mkdtempSync(join(tmpdir(), 'clone-cache-test-'));
let server: GitHttpServer;
let url: CheckedRepositoryUrl;
let head: string;
let first: string;
/** The tag object v1 names. */
let v1: string;

function checked(raw: string): CheckedRepositoryUrl {
  const decision = isRepositoryAllowed(raw, ['http://127.0.0.1:*/**']);
  if (!decision.allowed) throw new Error(decision.message);
  return decision.url;
}

beforeAll(async () => {
  createBareRepository(scratch, { 'README.md': 'one\n' });
  const bare = join(scratch, 'git', 'hello.git');
  first = git(['rev-parse', 'HEAD'], bare).trim();
  // A second commit on main, an annotated tag on the first, and a commit no ref points at.
  const work = join(scratch, 'work');
  git(['clone', '-q', bare, work], scratch);
  writeFileSync(join(work, 'README.md'), 'two\n');
  git(['commit', '-qam', 'two'], work);
  git(['push', '-q', 'origin', 'main'], work);
  git(['tag', '-a', '-m', 'first', 'v1', first], bare);
  head = git(['rev-parse', 'HEAD'], bare).trim();
  v1 = git(['rev-parse', 'v1'], bare).trim();
  server = await startGitHttpServer(join(scratch, 'git'), TOKEN);
  url = checked(`${server.origin}/hello.git`);
}, 60_000);

afterAll(async () => {
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** What the remote names for a run: a commit, through no tag unless given. */
const at = (commit: string, tag?: string) => ({ commit, tag });

/** The types of the objects a clone holds, one each. */
const objectTypes = (dir: string) => git(['cat-file', '--batch-all-objects', '--batch-check=%(objecttype)'], dir).trim().split('\n');

const isCloneFailed = (error: unknown) => RunFailure.isInstance(error) && error.reason === 'CloneFailed';

describe('remoteCommit: the commit the remote names, asked with the run credential', { timeout: 60_000 }, () => {
  it('names the remote HEAD, a branch, and the commit under an annotated tag with its tag object (control: the token opens the remote)', async () => {
    expect(await remoteCommit({ url, token: TOKEN, ...LIMITS })).toEqual(at(head));
    // With the ref the name stands for, as the clone records it (none for HEAD or an id).
    expect(await remoteCommit({ url, token: TOKEN, revision: 'main', ...LIMITS })).toEqual({ ...at(head), ref: 'refs/heads/main' });
    expect(await remoteCommit({ url, token: TOKEN, revision: 'v1', ...LIMITS })).toEqual({ ...at(first, v1), ref: 'refs/tags/v1' });
    expect(await remoteCommit({ url, token: TOKEN, revision: v1, ...LIMITS })).toEqual(at(first, v1));
    expect(await remoteCommit({ url, token: TOKEN, revision: head, ...LIMITS })).toEqual(at(head));
    expect(await remoteCommit({ url, token: TOKEN, revision: first, ...LIMITS })).toEqual(at(first));
  });

  it('security: without the credential, or with a wrong one, the remote refuses and nothing is named', async () => {
    for (const token of [undefined, 'not-the-token']) {
      const error = await remoteCommit({ url, token, ...LIMITS, timeoutMs: 20_000 }).catch((e: unknown) => e);
      expect(isCloneFailed(error)).toBe(true);
      expect(String((error as Error).message)).not.toContain(TOKEN);
    }
  });

  it('security: names no commit that is not some ref tip, though the run may read the repository', async () => {
    // `first` is reachable (main's parent, v1's target), but only as v1's peeled tip; make one that is no tip at all.
    const hidden = git(['commit-tree', '-m', 'hidden', `${head}^{tree}`], join(scratch, 'git', 'hello.git')).trim();
    expect(await remoteCommit({ url, token: TOKEN, revision: hidden, ...LIMITS })).toBeUndefined();
    expect(await remoteCommit({ url, token: TOKEN, revision: first, ...LIMITS })).toEqual(at(first));
    expect(await remoteCommit({ url, token: TOKEN, revision: 'no-such-branch', ...LIMITS })).toBeUndefined();
  });
});

describe('CloneCache', { timeout: 60_000 }, () => {
  const caches: CloneCache[] = [];
  const workDirs: string[] = [];
  const tracked = (cache: CloneCache) => (caches.push(cache), cache);
  afterAll(async () => {
    await Promise.all(caches.map((cache) => cache.clear()));
    for (const dir of workDirs) rmSync(dir, { recursive: true, force: true });
  });
  /** A run's clone and its archive, as the prepare job makes them (vouched ref-free, as it must be to be kept). */
  async function cloneArchive(): Promise<{ archive: RefFreeArchive; size: { bytes: number; entries: number }; workDir: string }> {
    const { dir, size } = await cloneMeasured({ url, token: TOKEN, ...LIMITS });
    const workDir = join(dir, '..');
    workDirs.push(workDir);
    const archive = join(workDir, 'workspace.tar');
    execFileSync('tar', ['-C', dir, '-cf', archive, '.']);
    const vouched = await refFreeArchive(dir, archive);
    if (!vouched) throw new Error('a fresh clone holds a ref');
    return { archive: vouched, size, workDir };
  }

  /** A run's take, its directory removed with the others after the tests. */
  async function take(cache: CloneCache, ...args: Parameters<CloneCache['take']>): Promise<string | undefined> {
    const taken = await cache.take(...args);
    if (taken) workDirs.push(taken.dir);
    return taken?.archive;
  }

  it("hands out the clone's own archive for its URL and commit, and nothing for another commit", async () => {
    const cache = tracked(new CloneCache(1024 ** 3));
    const made = await cloneArchive();
    const bytes = readFileSync(made.archive.path);
    await cache.keep(url, head, made.archive, made.size);
    rmSync(made.workDir, { recursive: true, force: true }); // the run that cloned is done
    const taken = await take(cache, url, at(head), LIMITS);
    expect(taken && readFileSync(taken).equals(bytes)).toBe(true);
    expect(await take(cache, url, at(first), LIMITS)).toBeUndefined();
    expect(await take(cache, checked(`${server.origin}/other.git`), at(head), LIMITS)).toBeUndefined();
  });

  it('checks a kept archive against the limits as they are now', async () => {
    const cache = tracked(new CloneCache(1024 ** 3));
    const made = await cloneArchive();
    await cache.keep(url, head, made.archive, made.size);
    expect(await take(cache, url, at(head), { ...LIMITS, maxCheckoutBytes: made.size.bytes - 1 })).toBeUndefined();
    expect(await take(cache, url, at(head), { ...LIMITS, maxCheckoutFiles: made.size.entries - 1 })).toBeUndefined();
    expect(await take(cache, url, at(head), LIMITS)).toBeDefined();
  });

  it('makes room least recently used first, and an archive a run holds stays whole for it', async () => {
    const made = await cloneArchive();
    const size = readFileSync(made.archive.path).length;
    let tick = 0;
    const cache = tracked(new CloneCache(2 * size, () => ++tick)); // a clock that never ties
    await cache.keep(url, 'a'.repeat(40), made.archive, made.size);
    await cache.keep(url, 'b'.repeat(40), made.archive, made.size);
    const held = await take(cache, url, at('a'.repeat(40)), LIMITS); // a is now the more recent
    await cache.keep(url, 'c'.repeat(40), made.archive, made.size);
    expect(cache.size).toEqual({ archives: 2, bytes: 2 * size });
    expect(await take(cache, url, at('b'.repeat(40)), LIMITS)).toBeUndefined();
    expect(await take(cache, url, at('a'.repeat(40)), LIMITS)).toBeDefined();
    await cache.keep(url, 'd'.repeat(40), made.archive, made.size);
    await cache.keep(url, 'e'.repeat(40), made.archive, made.size);
    expect(await take(cache, url, at('a'.repeat(40)), LIMITS)).toBeUndefined(); // evicted now
    expect(held && existsSync(held) && readFileSync(held).length).toBe(size); // but not from the run holding it
  });

  it('keeps nothing larger than itself', async () => {
    const made = await cloneArchive();
    const cache = tracked(new CloneCache(1024));
    await cache.keep(url, head, made.archive, made.size);
    expect(cache.size).toEqual({ archives: 0, bytes: 0 });
  });
});

describe('security: the clone cache keeps no clone that holds a ref', { timeout: 60_000 }, () => {
  const workDirs: string[] = [];
  afterAll(() => {
    for (const dir of workDirs) rmSync(dir, { recursive: true, force: true });
  });
  async function clone(): Promise<{ dir: string; archive: string }> {
    const { dir } = await cloneMeasured({ url, token: TOKEN, ...LIMITS });
    workDirs.push(join(dir, '..'));
    return { dir, archive: join(dir, '..', 'workspace.tar') };
  }

  it('vouches for a fresh clone: its HEAD is detached and it has no ref (the control)', async () => {
    const { dir, archive } = await clone();
    expect(git(['for-each-ref'], dir).trim()).toBe('');
    expect(objectTypes(dir)).not.toContain('tag');
    expect(await refFreeArchive(dir, archive)).toEqual({ path: archive, tag: undefined });
  });

  it.each([
    // What `revision: refs/heads/*:refs/replace/*` made: git then shows another tree under the commit id.
    ['a replace ref', (dir: string) => git(['replace', 'HEAD', git(['commit-tree', '-m', 'other', 'HEAD^{tree}'], dir).trim()], dir)],
    ['a branch', (dir: string) => git(['update-ref', 'refs/heads/planted', 'HEAD'], dir)],
    ['a tag in packed-refs', (dir: string) => (git(['update-ref', 'refs/tags/v9', 'HEAD'], dir), git(['pack-refs', '--all'], dir))],
  ])('refuses a clone that holds %s', async (_, plant) => {
    const { dir, archive } = await clone();
    plant(dir);
    expect(git(['for-each-ref'], dir).trim()).not.toBe('');
    expect(await refFreeArchive(dir, archive)).toBeUndefined();
  });

  /** A run's clone of `revision`, its archive, and what refFreeArchive vouches for, as the prepare job makes them. */
  async function vouchedClone(cloneUrl: CheckedRepositoryUrl, revision: string) {
    const { dir, size } = await cloneMeasured({ url: cloneUrl, token: TOKEN, revision, ...LIMITS });
    workDirs.push(join(dir, '..'));
    const archive = join(dir, '..', 'workspace.tar');
    execFileSync('tar', ['-C', dir, '-cf', archive, '.']);
    return { dir, size, archive, commit: git(['rev-parse', 'HEAD'], dir).trim(), vouched: await refFreeArchive(dir, archive) };
  }

  it('security: keeps a clone of an annotated tag under its tag object: a run of the tag gets it, a run of the commit by branch or id (from whom the server may hide the tag) or through a re-made tag does not', async () => {
    // The reviewer's scenario: the server shows team A a tag it hides from team B; both run its commit.
    const bare = join(scratch, 'git', 'tagged.git');
    git(['clone', '-q', '--bare', join(scratch, 'git', 'hello.git'), bare], scratch);
    git(['tag', '-a', '-m', 'Confidential: the acquisition release', 'hidden-release', 'main'], bare);
    git(['branch', 'b-branch', 'main'], bare);
    const tag = git(['rev-parse', 'hidden-release'], bare).trim();
    const tagged = checked(`${server.origin}/tagged.git`);
    const cache = new CloneCache(1024 ** 3);
    try {
      // Team A, as the prepare job does: clone, archive, keep what refFreeArchive vouches for.
      const a = await vouchedClone(tagged, 'hidden-release');
      expect(objectTypes(a.dir)).toContain('tag'); // the tag came
      expect(a.commit).toBe(head);
      expect(a.vouched).toEqual({ path: a.archive, tag });
      await cache.keep(tagged, a.commit, a.vouched!, a.size);
      expect(cache.size.archives).toBe(1);
      // Team A again: the remote names the same tag object, and gets the kept archive, tag object and all.
      const again = await remoteCommit({ url: tagged, token: TOKEN, revision: 'hidden-release', ...LIMITS });
      expect(again).toMatchObject(at(head, tag));
      const taken = await cache.take(tagged, again!, LIMITS);
      expect(taken && readFileSync(taken.archive).equals(readFileSync(a.archive))).toBe(true);
      rmSync(taken!.dir, { recursive: true, force: true });
      // Team B, from whom the server hides the tag: the same commit through its own branch, or by its id.
      git(['config', 'uploadpack.hideRefs', 'refs/tags/hidden-release'], bare);
      expect(await remoteCommit({ url: tagged, token: TOKEN, revision: tag, ...LIMITS })).toBeUndefined(); // the tag is hidden
      for (const revision of ['b-branch', head]) {
        const named = await remoteCommit({ url: tagged, token: TOKEN, revision, ...LIMITS });
        expect(named).toMatchObject(at(head));
        expect(await cache.take(tagged, named!, LIMITS)).toBeUndefined();
      }
      const b = await vouchedClone(tagged, 'b-branch');
      expect(objectTypes(b.dir)).toContain('commit');
      expect(objectTypes(b.dir)).not.toContain('tag');
      // B's own clone, the control: a clone of a branch is kept, under no tag.
      expect(b.vouched).toEqual({ path: b.archive, tag: undefined });
      // The tag re-made with another message: another tag object of the same commit.
      git(['config', '--unset', 'uploadpack.hideRefs'], bare);
      git(['tag', '-f', '-a', '-m', 'Public: the release', 'hidden-release', 'main'], bare);
      const remade = git(['rev-parse', 'hidden-release'], bare).trim();
      expect(remade).not.toBe(tag);
      const named = await remoteCommit({ url: tagged, token: TOKEN, revision: 'hidden-release', ...LIMITS });
      expect(named).toMatchObject(at(head, remade));
      expect(await cache.take(tagged, named!, LIMITS)).toBeUndefined();
      const c = await vouchedClone(tagged, 'hidden-release');
      expect(c.vouched?.tag).toBe(remade);
      expect(() => git(['cat-file', '-e', tag], c.dir)).toThrow(); // the first tag object is not in its clone
    } finally {
      await cache.clear();
    }
  });

  it.each([
    [
      'two tag objects (a tag of a tag)',
      (dir: string) => {
        git(['tag', '-a', '-m', 'inner', 'inner', 'HEAD'], dir);
        git(['tag', '-a', '-m', 'outer', 'outer', 'inner'], dir);
        git(['update-ref', '-d', 'refs/tags/inner'], dir);
        git(['update-ref', '-d', 'refs/tags/outer'], dir);
      },
    ],
    [
      'a tag object of another commit than the one checked out',
      (dir: string) => {
        git(['tag', '-a', '-m', 'other', 'other', git(['commit-tree', '-m', 'other', 'HEAD^{tree}'], dir).trim()], dir);
        git(['update-ref', '-d', 'refs/tags/other'], dir);
      },
    ],
  ])('refuses a clone that holds %s, though it holds no ref', async (_, plant) => {
    const { dir, archive } = await clone();
    plant(dir);
    expect(git(['for-each-ref'], dir).trim()).toBe('');
    expect(objectTypes(dir)).toContain('tag');
    expect(await refFreeArchive(dir, archive)).toBeUndefined();
  });

  it('vouches for a clone holding one tag object of its commit, naming it (the control of the refusals above)', async () => {
    const { dir, archive } = await clone();
    git(['tag', '-a', '-m', 'one', 'one', 'HEAD'], dir);
    const tag = git(['rev-parse', 'one'], dir).trim();
    git(['update-ref', '-d', 'refs/tags/one'], dir);
    expect(await refFreeArchive(dir, archive)).toEqual({ path: archive, tag });
  });

  it('fails closed: a directory that is no clone, though a ref-free clone holds it, and a git that cannot start', async () => {
    const { dir, archive } = await clone();
    // Asked in the directory, git would answer for the clone above it ("no refs").
    const inner = join(dir, 'sub');
    mkdirSync(inner);
    expect(await refFreeArchive(inner, archive)).toBeUndefined();
    const failing = () => {
      throw new Error('no git here');
    };
    expect(await refFreeArchive(dir, archive, failing)).toBeUndefined();
  });

  it('asks with git held to the memory limit (it reads the refs whatever wrote them), and fails closed when git cannot run within it', async () => {
    const { dir, archive } = await clone();
    const launched: string[][] = [];
    const recording: Launch = (command, args, options) => (launched.push([command, ...args]), launchHere(command, args, options));
    expect(await refFreeArchive(dir, archive, recording, 48 * 1024 * 1024)).toEqual({ path: archive, tag: undefined });
    expect(launched).toHaveLength(2);
    for (const line of launched) expect([line[0], ...line.slice(3, 5)]).toEqual(['/bin/sh', 'chamvi-limits', String(48 * 1024)]);
    expect(launched[0]).toContain('for-each-ref');
    expect(launched[1]).toContain('--batch-all-objects');
    // 1 KiB: git cannot even load.
    expect(await refFreeArchive(dir, archive, launchHere, 1024)).toBeUndefined();
  });
});
