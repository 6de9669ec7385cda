// `git apply` of a source run's diff in the worker's fresh clone (spec.continueFrom), before
// the tree goes into the sandbox. The diff is what a model wrote, so git gets it on stdin, runs
// without hooks or any config of the machine, and keeps its default refusals: no path outside
// the tree, none through a symlink. New files stay untracked, as they were in the source's
// sandbox; the finalize job's `git add --intent-to-add` counts them in the follow-up's diff.
// Before git applies it, what it would hold and search is judged from the files it names
// (apply-budget.ts), so a small diff cannot take the operator's container down; and every git
// here runs held to maxGitMemoryBytes (git-runner.ts), as the clone's does: it reads files and
// objects of the repository's, and what the budget does not foresee fails this apply alone.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { FAILURE_MESSAGES } from '../api/failure-messages.ts';
import { isCommitId } from '../api/commit-id.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { applyBudget, applyCostRefusal, applyOutOfMemoryRefusal, patchesRead, type NamedFiles, type TreeFile } from './apply-budget.ts';
import { diffRefusal, listedPatchesRefusal } from './diff-refusal.ts';
import { formatBytes } from './format-bytes.ts';
import { GIT_MEMORY_LIMIT_BYTES } from './git-limits.ts';
import { GitOutOfMemoryError, runGit, type GitCommand, type GitExit } from './git-runner.ts';
import { isolatedGitEnvironment } from './isolated-git-environment.ts';
import { launchHere, type Launch } from './process-launcher.ts';

export type ApplyOutcome = { applied: true } | { applied: false; output: string };

/** How long each git may take, and the memory it may have. */
export interface ApplyLimits {
  /** Default 120 s. */
  timeoutMs?: number | undefined;
  /** Each git's (git-limits.ts), and what one `git apply` may hold (apply-budget.ts); default GIT_MEMORY_LIMIT_BYTES. */
  maxGitMemoryBytes?: number | undefined;
}

/** How the diff will be applied, for applyCostRefusalIn. */
export interface ApplyOptions extends ApplyLimits {
  /** `git apply --index` (publish), which holds the whole index too. */
  index?: boolean | undefined;
}

/** The clone every git here runs in, and the limits filled in. */
interface CloneGit {
  dir: string;
  launch: Launch;
  timeoutMs: number;
  memoryBytes: number;
}

const gitIn = (dir: string, launch: Launch, limits: ApplyLimits): CloneGit => ({
  dir,
  launch,
  timeoutMs: limits.timeoutMs ?? 120_000,
  memoryBytes: limits.maxGitMemoryBytes ?? GIT_MEMORY_LIMIT_BYTES,
});

/**
 * Applies the diff in `dir`, or says why not (the caller fails the run InvalidSpec with it:
 * prepare-job.ts): git's refusal, the budget's (apply-budget.ts), or a git that ran out of
 * its memory (GitOutOfMemoryError, said with what to do).
 */
export async function applyDiff(dir: string, diff: string, launch: Launch = launchHere, limits: ApplyLimits = {}): Promise<ApplyOutcome> {
  const refused = diffRefusal(diff);
  if (refused) return { applied: false, output: refused };
  const git = gitIn(dir, launch, limits);
  try {
    // git's own list of the diff's patches first (it reads no file): a path patched twice, or
    // patches other than the headers name, are refused.
    const listed = await gitApply(git, ['--numstat', '-z'], diff);
    if (listed.code !== 0) return { applied: false, output: listed.stderr };
    const listRefusal = listedPatchesRefusal(diff, listed.stdout);
    if (listRefusal) return { applied: false, output: listRefusal };
    const costRefusal = await costRefusalIn(git, diff, listed.stdout);
    if (costRefusal) return { applied: false, output: costRefusal };
    const applied = await gitApply(git, ['--whitespace=nowarn'], diff);
    return applied.code === 0 ? { applied: true } : { applied: false, output: applied.timedOut ? 'git apply timed out' : applied.stderr };
  } catch (error) {
    if (GitOutOfMemoryError.isInstance(error)) return { applied: false, output: applyOutOfMemoryRefusal(error.message) };
    throw error;
  }
}

/**
 * Why git should not apply the diff in `dir`, from what it would hold and search doing it
 * (apply-budget.ts, against maxGitMemoryBytes): the paths git reads, from its own lists of the
 * patches (`numstat`, and the same reversed, which names each patch's old path), and those files
 * in HEAD's tree. Undefined when it fits. Also publish's (publish-git.ts), before its `git apply
 * --index`. Only once listedPatchesRefusal has passed: the lines of each patch's hunks are
 * counted by `diff --git` section, which it checks are git's patches, one for one.
 */
export async function applyCostRefusalIn(
  dir: string,
  diff: string,
  numstat: string,
  launch: Launch = launchHere,
  options: ApplyOptions = {},
): Promise<string | undefined> {
  try {
    return await costRefusalIn(gitIn(dir, launch, options), diff, numstat, options.index ?? false);
  } catch (error) {
    if (GitOutOfMemoryError.isInstance(error)) return applyOutOfMemoryRefusal(error.message);
    throw error;
  }
}

async function costRefusalIn(git: CloneGit, diff: string, numstat: string, index = false): Promise<string | undefined> {
  const reversed = await gitApply(git, ['-R', '--numstat', '-z'], diff);
  if (reversed.code !== 0) return reversed.timedOut ? 'git apply -R --numstat timed out' : reversed.stderr;
  const patches = patchesRead(numstat, reversed.stdout);
  if (!patches) return "git lists the diff's patches differently read backwards, so the files it reads are not known: it was not applied";
  const budget = applyBudget(git.memoryBytes);
  const named = await readNamedFiles(
    git.dir,
    patches.map((patch) => patch.path),
    git.launch,
    budget.memoryBytes,
    git.timeoutMs,
    git.memoryBytes,
  );
  if ('failed' in named) return `${named.failed} (reading the sizes of the files the diff changes)`;
  // The clone's own index, which its checkout wrote: about twice its size in memory (apply-budget.ts).
  const indexBytes = index ? ((await stat(join(git.dir, '.git', 'index')).catch(() => undefined))?.size ?? 0) : undefined;
  return applyCostRefusal(diff, patches, { ...named.named, indexBytes }, budget);
}

/**
 * git ARGS in the clone, without hooks or the machine's config and found by PATH's absolute
 * entries only (isolated-git-environment.ts: a relative one is searched from the clone, where
 * the repository may have put its own `git`), under the memory limit
 * (git-runner.ts), `input` on its stdin, its stdout handed to `onStdout` as it comes (which
 * returns false to stop git) or its end kept.
 */
function gitHere(git: CloneGit, args: readonly string[], input: string, stdout: Pick<GitCommand, 'onStdout' | 'stdoutTailBytes'>) {
  return runGit({
    launch: git.launch,
    cwd: git.dir,
    env: isolatedGitEnvironment(),
    args: ['-c', 'core.hooksPath=/dev/null', ...args],
    memoryBytes: git.memoryBytes,
    timeoutMs: git.timeoutMs,
    input,
    ...stdout,
  });
}

/** `git apply ARGS -` in the clone with the diff on stdin. */
function gitApply(git: CloneGit, args: readonly string[], diff: string): Promise<GitExit> {
  return gitHere(git, ['apply', ...args, '-'], diff, { stdoutTailBytes: 4_000_000 });
}

/**
 * Splits a NUL-separated stream into its records, across chunks. A record's pieces are joined
 * once, at its end: joined at every chunk, a long one was copied again for each.
 */
function nulRecords(onRecord: (record: Buffer) => void): (chunk: Buffer) => boolean {
  let pieces: Buffer[] = [];
  return (chunk) => {
    let start = 0;
    for (let end = chunk.indexOf(0); end !== -1; end = chunk.indexOf(0, start)) {
      const piece = chunk.subarray(start, end);
      onRecord(pieces.length > 0 ? Buffer.concat([...pieces, piece]) : piece);
      pieces = [];
      start = end + 1;
    }
    if (start < chunk.length) pieces.push(Buffer.from(chunk.subarray(start)));
    return true;
  };
}

/**
 * The blobs of HEAD's tree at `paths` (git's spelling, from `git apply --numstat -z`): the size
 * and lines of each, which is what `git apply` reads of them (apply-budget.ts). They come from
 * git's object store, not the checkout, so no path is followed out of the tree, and a path is
 * matched as git prints it (the tree's listing and numstat decoded alike: one UTF-8 reading of
 * the whole name). Reading stops once the sizes pass `stopAfterBytes`, since the diff is
 * refused then whatever the rest holds: no more than that is read. A path of an object other
 * than a file (a directory, a submodule) or none is left out: git reads nothing there.
 *
 * The tree's listing prints every path whole, so its size is the paths' (trees shared many
 * times over list gigabytes from a few KB), not the checkout's: it is read up to
 * `maxListingBytes` (default `memoryBytes`), and past it the sizes are not known. No tree that
 * was checked out under the same memory limit lists more: git's index held each of its paths,
 * and more for each entry than the listing prints.
 */
export async function readNamedFiles(
  dir: string,
  paths: readonly string[],
  launch: Launch,
  stopAfterBytes: number,
  timeoutMs: number,
  memoryBytes: number = GIT_MEMORY_LIMIT_BYTES,
  maxListingBytes: number = memoryBytes,
): Promise<{ named: NamedFiles } | { failed: string }> {
  const git: CloneGit = { dir, launch, timeoutMs, memoryBytes };
  const wanted = new Set(paths);
  const files = new Map<string, TreeFile>();
  if (wanted.size === 0) return { named: { files, complete: true } };
  // Blob id -> the paths that hold it (a file copied in the tree is read once per path).
  const holders = new Map<string, string[]>();
  let listed = 0;
  const records = nulRecords((record) => {
    // <mode> SP <type> SP <object> TAB <path>
    const tab = record.indexOf(9);
    const path = record.subarray(tab + 1).toString('utf8');
    if (tab < 0 || !wanted.has(path)) return;
    const [, type, object] = record.subarray(0, tab).toString('latin1').split(' ');
    if (type !== 'blob' || !object) return;
    holders.set(object, [...(holders.get(object) ?? []), path]);
  });
  const listing = await gitHere(git, ['ls-tree', '-r', '-z', '--full-tree', 'HEAD'], '', {
    onStdout: (chunk) => {
      listed += chunk.length;
      return listed <= maxListingBytes && records(chunk);
    },
  });
  if (listed > maxListingBytes)
    return {
      failed:
        `the listing of HEAD's tree grew past ${formatBytes(maxListingBytes)} and was stopped: its paths are more than git's ` +
        'index holds under the memory limit of git (config.maxGitMemoryBytes), which a repository of such paths needs raised',
    };
  if (listing.code !== 0) return { failed: listing.timedOut ? 'git ls-tree timed out' : `git ls-tree failed: ${listing.stderr.trim()}` };
  if (holders.size === 0) return { named: { files, complete: true } };
  let total = 0;
  let complete = true;
  const reader = new BlobLines(
    (object, bytes) => {
      const holding = holders.get(object) ?? [];
      total += bytes * holding.length;
      if (total <= stopAfterBytes) return true;
      // Over the bound with this one: counted by its size, its lines not read.
      for (const path of holding) files.set(path, { bytes, lines: 0 });
      complete = false;
      return false;
    },
    (object, file) => {
      for (const path of holders.get(object) ?? []) files.set(path, file);
    },
  );
  const reading = await gitHere(git, ['cat-file', '--batch'], [...holders.keys()].join('\n') + '\n', {
    onStdout: (chunk) => reader.push(chunk),
  });
  if (!reading.stopped && reading.code !== 0)
    return { failed: reading.timedOut ? 'git cat-file timed out' : `git cat-file failed: ${reading.stderr.trim()}` };
  return { named: { files, complete } };
}

/**
 * Reads `git cat-file --batch` as it comes: for each object its header (`<id> <type> <size>`,
 * or `<id> missing`), then its bytes and a newline. Counts each blob's lines (its newlines, and
 * a last line without one) without keeping it. `onSize` hears each size first and returns false
 * to stop; `onFile` gets each whole blob's size and lines.
 */
class BlobLines {
  private header = '';
  private object = '';
  private left = -1;
  private size = 0;
  private lines = 0;
  private last = 10;

  constructor(
    private readonly onSize: (object: string, bytes: number) => boolean,
    private readonly onFile: (object: string, file: TreeFile) => void,
  ) {}

  /** Takes a chunk of the output; false once `onSize` asked to stop. */
  push(chunk: Buffer): boolean {
    let at = 0;
    while (at < chunk.length) {
      if (this.left < 0) {
        const end = chunk.indexOf(10, at);
        this.header += chunk.subarray(at, end < 0 ? chunk.length : end).toString('latin1');
        if (end < 0) return true;
        at = end + 1;
        const [object = '', type, size] = this.header.split(' ');
        this.header = '';
        if (type === undefined || size === undefined) continue; // `<id> missing`: nothing follows
        this.object = object;
        this.size = Number(size);
        this.left = this.size + 1; // its bytes, then a newline
        this.lines = 0;
        this.last = 10;
        if (!this.onSize(object, this.size)) return false;
        continue;
      }
      const take = Math.min(this.left, chunk.length - at);
      // The blob's own bytes; the newline git adds after it is not the blob's.
      const own = Math.min(take, this.left - 1);
      for (let index = at; index < at + own; index++) if (chunk[index] === 10) this.lines++;
      if (own > 0) this.last = chunk[at + own - 1]!;
      at += take;
      this.left -= take;
      if (this.left === 0) {
        this.onFile(this.object, { bytes: this.size, lines: this.lines + (this.last === 10 ? 0 : 1) });
        this.left = -1;
      }
    }
    return true;
  }
}

/**
 * The commit checked out in `dir` (full SHA). git reads the commit whole to peel HEAD to it
 * (one the repository's owner made), so under the memory limit too; a failure rejects (the job
 * is retried), one that ran out of memory with GitOutOfMemoryError. What git prints becomes the
 * run's revision and the clone cache's key: output that is not one commit id fails the run
 * CloneFailed (a git that answers so will on every try), never a revision of its making.
 */
export async function headRevision(
  dir: string,
  launch: Launch = launchHere,
  maxGitMemoryBytes: number = GIT_MEMORY_LIMIT_BYTES,
): Promise<string> {
  const exit = await runGit({
    launch,
    cwd: dir,
    env: isolatedGitEnvironment(),
    args: ['rev-parse', '--verify', 'HEAD^{commit}'],
    memoryBytes: maxGitMemoryBytes,
    timeoutMs: REV_PARSE_TIMEOUT_MS,
    stdoutTailBytes: 1024,
  });
  if (exit.code !== 0) throw new Error(`git rev-parse HEAD ${exit.timedOut ? 'timed out' : `failed: ${exit.stderr.trim()}`}`);
  // One line, the id and its newline: a second line, or anything else, is not git's answer.
  const revision = exit.stdout.endsWith('\n') ? exit.stdout.slice(0, -1) : exit.stdout;
  if (isCommitId(revision)) return revision;
  throw new RunFailure(
    REASONS.CloneFailed,
    FAILURE_MESSAGES.cloneFailed(
      `git rev-parse HEAD printed ${JSON.stringify(exit.stdout.slice(0, 80))}, not a commit id, so the commit checked out is not known`,
    ),
  );
}

/** A rev-parse reads one commit; past this it is stuck (a disk that does not answer). */
const REV_PARSE_TIMEOUT_MS = 60_000;
