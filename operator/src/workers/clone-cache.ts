// Workspace archives of earlier clones, kept by repository URL and commit, so that a run of a
// repository and commit this worker has cloned before starts from the kept archive: no fetch,
// no checkout, no tar (#17.3). Evals and schedules run one repository and commit many times.
//
// - Off unless the admin sizes it (cloneCacheMaxBytes); it lives in the worker's /tmp beside
//   the clones, so it counts against the same ephemeral storage.
// - A kept archive is handed out only for the commit the remote itself names for the run's
//   revision, asked with the run's own credential (git-clone.ts remoteCommit): a run gets
//   nothing it could not have fetched (SECURITY.md).
// - It is checked against the clone limits as they are now (they may have narrowed since).
// - It keeps only the archive of a clone that holds no ref (`git for-each-ref` lists nothing):
//   a clone's HEAD is detached and its fetch writes no ref, so a ref there was written by
//   something else (a revision read as a refspec wrote refs/replace/*, which make git show
//   another tree under the same commit id), and the archive goes to other namespaces' runs.
//   Nor one that holds a tag object (a revision that is an annotated tag fetches it): the tag's
//   name and message are not the commit's, and the server may hide the tag from other runs.
//   keep() takes only a RefFreeArchive, which refFreeArchive alone makes; it fails closed.
// - Least recently used archives go first; one being handed out is a hard link of the run's
//   own (link(2)), so its eviction cannot pull it from under the run.
// - One directory per process, named as a clone (stale-clones.ts): a killed process's cache is
//   removed with its clones by the next start.
import { createHash } from 'node:crypto';
import { link, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { absolutePath } from './absolute-path.ts';
import type { TreeSize } from './git-clone.ts';
import { GIT_MEMORY_LIMIT_BYTES } from './git-limits.ts';
import { runGit } from './git-runner.ts';
import { launchHere, type Launch } from './process-launcher.ts';
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
/** The path of a clone's archive, vouched for by refFreeArchive: the only kind the cache keeps. */
export type RefFreeArchive = string & { readonly [refFree]: true };

/** How long each look at a clone's refs and objects may take; past it the archive is not kept. */
const REF_CHECK_TIMEOUT_MS = 30_000;

/**
 * `archive`, vouched for as the archive of the clone in `dir`, when the clone names nothing
 * but its commit: `git for-each-ref` there lists no ref, and it holds no tag object. A run
 * whose revision is an annotated tag fetched the tag object with the commit (its name, tagger
 * and message), and the archive is keyed by URL and commit only: another namespace's run of
 * the same commit, from whom the server hides that tag, would get it. Such a clone is not kept,
 * so a tag's runs clone each time (dropping the tag object would mean rewriting the pack).
 * Undefined whenever an answer is not a clean "none" (git fails, is killed, times out, or runs
 * out of its memory: it reads what the clone holds, whatever wrote it): a run costs one clone
 * more, never another run's tree.
 */
export async function refFreeArchive(
  dir: string,
  archive: string,
  launch: Launch = launchHere,
  maxGitMemoryBytes: number = GIT_MEMORY_LIMIT_BYTES,
): Promise<RefFreeArchive | undefined> {
  const holdsNone = (args: string[], found: (chunk: Buffer) => boolean) => answersNone(dir, args, launch, maxGitMemoryBytes, found);
  // One ref is enough to refuse.
  if (!(await holdsNone(['for-each-ref', '--format=%(refname)'], (chunk) => chunk.length > 0))) return undefined;
  // Each object's type on a line of its own; one tag is enough to refuse.
  let line = '';
  const tagFound = (chunk: Buffer) => {
    const lines = (line + chunk.toString('latin1')).split('\n');
    line = lines.pop()!.slice(-OBJECT_TYPE_MAX_CHARACTERS);
    return lines.includes('tag');
  };
  const tagFree = await holdsNone(['cat-file', '--batch-all-objects', '--unordered', '--batch-check=%(objecttype)'], tagFound);
  return tagFree ? (archive as RefFreeArchive) : undefined;
}

/** The longest object type git prints ("commit"): what a line cut by a chunk carries over. */
const OBJECT_TYPE_MAX_CHARACTERS = 'commit'.length;

/**
 * Whether git `args`, run on the clone in `dir`, ends well with `found` never true of what it
 * prints (git is stopped at the first find). False for anything but a clean end: fails closed.
 */
async function answersNone(
  dir: string,
  args: string[],
  launch: Launch,
  maxGitMemoryBytes: number,
  found: (chunk: Buffer) => boolean,
): Promise<boolean> {
  let seen = false;
  try {
    const exit = await runGit({
      launch,
      cwd: dir,
      // GIT_DIR, not the working directory: a clone without its .git must not answer for a repository above it.
      env: {
        PATH: absolutePath(process.env.PATH),
        HOME: '/nonexistent',
        GIT_DIR: join(dir, '.git'),
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
      },
      args,
      memoryBytes: maxGitMemoryBytes,
      timeoutMs: REF_CHECK_TIMEOUT_MS,
      onStdout: (chunk) => {
        if (found(chunk)) seen = true;
        return !seen;
      },
    });
    return exit.code === 0 && !seen;
  } catch {
    return false;
  }
}

const cacheKey = (url: string, commit: string) => createHash('sha256').update(`${url}\n${commit}`).digest('hex');

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
   * The kept archive of `url` at `commit`, if there is one and its checkout is within `limits`,
   * linked as `workspace.tar` into a new directory of the run's own (named as a clone, for the
   * run to remove); undefined otherwise (the run clones).
   */
  async take(url: string, commit: string, limits: CheckoutLimits): Promise<{ dir: string; archive: string } | undefined> {
    const archive = this.kept.get(cacheKey(url, commit));
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
   * Keeps `archive` (a run's, linked, not copied) as `url` at `commit`, dropping the least
   * recently used to make room. Only an archive refFreeArchive vouched for.
   */
  keep(url: string, commit: string, archive: RefFreeArchive, checkout: CachedArchive['checkout']): Promise<void> {
    const next = this.keeping.then(() => this.keepNow(url, commit, archive, checkout));
    this.keeping = next.catch(() => undefined);
    return next;
  }

  private async keepNow(url: string, commit: string, archive: string, checkout: CachedArchive['checkout']): Promise<void> {
    const key = cacheKey(url, commit);
    const { size: bytes } = await stat(archive);
    if (this.kept.has(key) || bytes > this.maxBytes) return;
    const dir = await this.dir();
    for (const dropped of evictions([...this.kept.values()], bytes, this.maxBytes)) {
      this.kept.delete(dropped);
      await rm(join(dir, dropped), { force: true });
    }
    // Linked under a name of its own, then renamed into place: a take never sees half of it.
    const pending = join(dir, `${key}.${process.pid}.${this.now()}.pending`);
    await link(archive, pending);
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
