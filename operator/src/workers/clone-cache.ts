// Workspace archives of earlier clones, kept by repository URL and commit (and tag object, for
// an annotated tag's), so that a run of a repository and commit this worker has cloned before
// starts from the kept archive: no fetch, no checkout, no tar (#17.3). Evals and schedules run
// one repository and commit many times, often pinned to a release tag.
//
// - Off unless the admin sizes it (cloneCacheMaxBytes); it lives in the worker's /tmp beside
//   the clones, so it counts against the same ephemeral storage.
// - A kept archive is handed out only for the commit the remote itself names for the run's
//   revision, and the annotated tag object it names it through if any, asked with the run's own
//   credential (git-clone.ts remoteCommit): a run gets nothing it could not have fetched
//   (SECURITY.md).
// - It is checked against the clone limits as they are now (they may have narrowed since).
// - It keeps only the archive of a clone that holds no ref (`git for-each-ref` lists nothing):
//   a clone's HEAD is detached and its fetch writes no ref, so a ref there was written by
//   something else (a revision read as a refspec wrote refs/replace/*, which make git show
//   another tree under the same commit id), and the archive goes to other namespaces' runs.
// - A clone of an annotated tag holds the tag object (its fetch brings it): the tag's name,
//   tagger and message are not the commit's, and the server may hide the tag from other runs of
//   the commit. Its archive is kept under the tag object's id too (which commits to all three),
//   so only a run the remote names that same tag object for gets it; a run of the commit by
//   branch or id, or through another tag, never does. A clone holding two tag objects (a tag of
//   a tag), or one that is not a tag of its commit, is not kept.
//   keep() takes only a RefFreeArchive, which refFreeArchive alone makes, naming the tag object
//   it holds; it fails closed.
// - Least recently used archives go first; one being handed out is a hard link of the run's
//   own (link(2)), so its eviction cannot pull it from under the run.
// - One directory per process, named as a clone (stale-clones.ts): a killed process's cache is
//   removed with its clones by the next start.
import { createHash } from 'node:crypto';
import { link, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCommitId } from '../api/commit-id.ts';
import type { TreeSize } from './git-clone.ts';
import { GIT_MEMORY_LIMIT_BYTES } from './git-limits.ts';
import { runGit } from './git-runner.ts';
import { isolatedGitEnvironment } from './isolated-git-environment.ts';
import { launchHere, type Launch } from './process-launcher.ts';
import type { NamedCommit } from './remote-refs.ts';
import { clonePrefix } from './stale-clones.ts';

export interface CachedArchive {
  key: string;
  /** The archive file's size: what counts against maxBytes. */
  bytes: number;
  /** The checkout's size and entries, as the clone measured them. */
  checkout: Pick<TreeSize, 'bytes' | 'entries'>;
  lastUsed: number;
}

export interface CheckoutLimits {
  maxCheckoutBytes: number;
  maxCheckoutFiles: number;
}

/** Which archives to drop so that `incoming` more bytes fit in `maxBytes`: least recently used first (pure). */
export function evictions(kept: readonly CachedArchive[], incoming: number, maxBytes: number): string[] {
  let total = kept.reduce((sum, archive) => sum + archive.bytes, 0) + incoming;
  const dropped: string[] = [];
  for (const archive of [...kept].sort((a, b) => a.lastUsed - b.lastUsed)) {
    if (total <= maxBytes) break;
    dropped.push(archive.key);
    total -= archive.bytes;
  }
  return dropped;
}

declare const refFree: unique symbol;
/**
 * A clone's archive, vouched for by refFreeArchive: the only kind the cache keeps. `tag` is the
 * one tag object it holds (a run of an annotated tag fetched it), under whose id it is kept too:
 * a caller cannot keep it without.
 */
export type RefFreeArchive = { readonly path: string; readonly tag: string | undefined } & { readonly [refFree]: true };

/** How long each look at a clone's refs and objects may take; past it the archive is not kept. */
const REF_CHECK_TIMEOUT_MS = 30_000;

/**
 * `archive`, vouched for as the archive of the clone in `dir`, when the clone names nothing
 * but its commit and the tag object its revision went through: `git for-each-ref` there lists
 * no ref, and it holds at most one tag object, a tag of the commit checked out. A run whose
 * revision is an annotated tag fetched the tag object with the commit (its name, tagger and
 * message), which the server may hide from another namespace's run of the same commit: the
 * archive then names it, and the cache hands it out only to a run the remote names that tag
 * object for. Undefined whenever an answer is not a clean one (git fails, is killed, times
 * out, or runs out of its memory: it reads what the clone holds, whatever wrote it): a run
 * costs one clone more, never another run's tree or tag.
 */
export async function refFreeArchive(
  dir: string,
  archive: string,
  launch: Launch = launchHere,
  maxGitMemoryBytes: number = GIT_MEMORY_LIMIT_BYTES,
): Promise<RefFreeArchive | undefined> {
  const ask = (args: string[], read: (chunk: Buffer) => boolean) => endsWell(dir, args, launch, maxGitMemoryBytes, read);
  // One ref is enough to refuse.
  if (!(await ask(['for-each-ref', '--format=%(refname)'], (chunk) => chunk.length === 0))) return undefined;
  // Each object's type and id on a line of its own; a second tag, or a line that is not one, is enough to refuse.
  const tags: string[] = [];
  let rest = '';
  const listed = await ask(['cat-file', '--batch-all-objects', '--unordered', '--batch-check=%(objecttype) %(objectname)'], (chunk) => {
    const lines = (rest + chunk.toString('latin1')).split('\n');
    rest = lines.pop()!;
    for (const line of lines) if (line.startsWith('tag ')) tags.push(line.slice('tag '.length));
    return tags.length <= 1 && rest.length <= OBJECT_LINE_MAX_CHARACTERS;
  });
  if (!listed || rest !== '') return undefined;
  const [tag] = tags;
  if (tag === undefined) return { path: archive, tag: undefined } as RefFreeArchive;
  if (!isCommitId(tag)) return undefined;
  // The key pairs the tag with the commit checked out: it must be that commit's tag.
  let peeled = '';
  const read = await ask(['rev-parse', `${tag}^{commit}`, 'HEAD'], (chunk) => (peeled += chunk.toString('latin1')).length <= 2 * 65);
  const [target, head, end] = peeled.split('\n');
  const ofHead = read && isCommitId(target) && target === head && end === '';
  return ofHead ? ({ path: archive, tag } as RefFreeArchive) : undefined;
}

/** The longest line the object listing prints: "commit " and a SHA-256 id; a longer one is not git's. */
const OBJECT_LINE_MAX_CHARACTERS = 'commit '.length + 64;

/**
 * Whether git `args`, run on the clone in `dir`, ends well with `read` never false of what it
 * prints (git is stopped at the first false). False for anything but a clean end: fails closed.
 */
async function endsWell(
  dir: string,
  args: string[],
  launch: Launch,
  maxGitMemoryBytes: number,
  read: (chunk: Buffer) => boolean,
): Promise<boolean> {
  let refused = false;
  try {
    const exit = await runGit({
      launch,
      cwd: dir,
      // GIT_DIR, not the working directory: a clone without its .git must not answer for a repository above it.
      env: { ...isolatedGitEnvironment(), GIT_DIR: join(dir, '.git') },
      args,
      memoryBytes: maxGitMemoryBytes,
      timeoutMs: REF_CHECK_TIMEOUT_MS,
      onStdout: (chunk) => {
        if (!read(chunk)) refused = true;
        return !refused;
      },
    });
    return exit.code === 0 && !refused;
  } catch {
    return false;
  }
}

/** The name an archive is kept under: its repository, its commit and the tag object it holds (none: null). */
const cacheKey = (url: string, commit: string, tag: string | undefined) =>
  createHash('sha256')
    .update(JSON.stringify([url, commit, tag ?? null]))
    .digest('hex');

export class CloneCache {
  private readonly kept = new Map<string, CachedArchive>();
  private directory: Promise<string> | undefined;
  /** Keeps one at a time, so that two evictions never count the same room. */
  private keeping: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly maxBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The kept archive of `url` at `named.commit`, holding the tag object `named.tag` (none when
   * absent), if there is one and its checkout is within `limits`, linked as `workspace.tar` into
   * a new directory of the run's own (named as a clone, for the run to remove); undefined
   * otherwise (the run clones).
   */
  async take(url: string, named: NamedCommit, limits: CheckoutLimits): Promise<{ dir: string; archive: string } | undefined> {
    const archive = this.kept.get(cacheKey(url, named.commit, named.tag));
    if (!archive) return undefined;
    if (archive.checkout.bytes > limits.maxCheckoutBytes || archive.checkout.entries > limits.maxCheckoutFiles) return undefined;
    const dir = await mkdtemp(join(tmpdir(), clonePrefix(process.pid)));
    const target = join(dir, 'workspace.tar');
    try {
      await link(join(await this.dir(), archive.key), target);
    } catch {
      // Evicted or removed from under the map: a clone, as without a cache.
      this.kept.delete(archive.key);
      await rm(dir, { recursive: true, force: true });
      return undefined;
    }
    archive.lastUsed = this.now();
    return { dir, archive: target };
  }

  /**
   * Keeps `archive` (a run's, linked, not copied) as `url` at `commit` with the tag object it
   * holds, dropping the least recently used to make room. Only an archive refFreeArchive vouched for.
   */
  keep(url: string, commit: string, archive: RefFreeArchive, checkout: CachedArchive['checkout']): Promise<void> {
    const next = this.keeping.then(() => this.keepNow(url, commit, archive, checkout));
    this.keeping = next.catch(() => undefined);
    return next;
  }

  private async keepNow(url: string, commit: string, archive: RefFreeArchive, checkout: CachedArchive['checkout']): Promise<void> {
    const key = cacheKey(url, commit, archive.tag);
    const { size: bytes } = await stat(archive.path);
    if (this.kept.has(key) || bytes > this.maxBytes) return;
    const dir = await this.dir();
    for (const dropped of evictions([...this.kept.values()], bytes, this.maxBytes)) {
      this.kept.delete(dropped);
      await rm(join(dir, dropped), { force: true });
    }
    // Linked under a name of its own, then renamed into place: a take never sees half of it.
    const pending = join(dir, `${key}.${process.pid}.${this.now()}.pending`);
    await link(archive.path, pending);
    await rename(pending, join(dir, key));
    this.kept.set(key, { key, bytes, checkout, lastUsed: this.now() });
  }

  /** What is kept, for metrics and tests. */
  get size(): { archives: number; bytes: number } {
    let bytes = 0;
    for (const archive of this.kept.values()) bytes += archive.bytes;
    return { archives: this.kept.size, bytes };
  }

  /** Forgets and removes every kept archive (the replica's shutdown). */
  async clear(): Promise<void> {
    const directory = this.directory;
    this.kept.clear();
    this.directory = undefined;
    if (directory) await rm(await directory, { recursive: true, force: true });
  }

  private dir(): Promise<string> {
    this.directory ??= mkdtemp(join(tmpdir(), clonePrefix(process.pid)));
    return this.directory;
  }
}
