// The git half of publishing, in the worker's own clone of the run's starting commit: look the
// branch up, make the commit, push it. The token reaches git as the clone's does (git-clone.ts:
// askpass answering only the checked origin, no redirect, only the URL's protocol), never on a
// command line or in a URL; whatever git prints is scrubbed of it before it is shown.
//
// Every git here runs under the memory limit of git-limits.ts (git-runner.ts): the lookup reads a
// branch head anyone who may push made, and `git apply` the files a model's diff names, judged
// before it runs against the same limit (apply-budget.ts).
//
// The commit is deterministic: the tree is the starting commit with the run's diff applied, its
// parent that commit, author, committer and both dates fixed by the caller. A retried job makes
// the very same commit, so it finds it on the branch and pushes nothing.
//
// What git prints is read whole or not at all: past its bound git is stopped and the publish
// fails, saying so. A tail of the output was kept before, and a remote's lookup cut to its last
// megabyte lost the very lines it was for (see lookUpRemote).
import { isCommitId } from '../api/commit-id.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { redactSecrets } from '../providers/redact-secrets.ts';
import type { RemoteBranch } from '../publish/decide-publish.ts';
import { applyOutOfMemoryRefusal } from './apply-budget.ts';
import { applyCostRefusalIn } from './apply-diff.ts';
import { diffRefusal, listedPatchesRefusal } from './diff-refusal.ts';
import { formatBytes } from './format-bytes.ts';
import { SAFE_GIT_CONFIG } from './git-clone.ts';
import { GIT_MEMORY_LIMIT_BYTES, LS_REMOTE_MAX_BYTES } from './git-limits.ts';
import { GitOutOfMemoryError, runGit } from './git-runner.ts';
import { GitNotStartedError } from './errors/git-not-started-error.ts';
import { launchHere, LauncherLostError, type Launch } from './process-launcher.ts';
import { parseLsRemote, refNamedBy } from './remote-refs.ts';

export interface PublishClone {
  /** The clone's work tree (HEAD: the run's starting commit, remote origin: the checked URL). */
  dir: string;
  /** From gitEnvironment: the askpass for the checked origin when there is a token. */
  env: NodeJS.ProcessEnv;
  token: string | undefined;
  /** Starts git (process-launcher.ts); default: from this process. */
  launch?: Launch;
  /**
   * The most a fetch from the remote may write (its pack, kept whole): the clone's bound,
   * maxCheckoutBytes and room for trees. A server that ignores the fetch's filter would send
   * the head commit's whole tree; a branch filled with gigabytes is stopped here.
   */
  maxFetchBytes: number;
  /** The memory each git process may have (git-limits.ts); default GIT_MEMORY_LIMIT_BYTES. */
  maxGitMemoryBytes?: number;
}

const GIT_TIMEOUT_MS = 300_000;

/**
 * What one git here may print, read whole: a line of ids (write-tree, commit-tree, cat-file), a
 * commit message already checked to be under OPERATOR_COMMIT_MAX_BYTES, or `git apply
 * --numstat` of a kept diff (at most 1 MiB, and numstat prints less than the diff holds).
 */
const OUTPUT_MAX_BYTES = 4 * 1024 * 1024;

/**
 * The largest commit the operator makes, with room to spare: its headers (tree, parent, author
 * and committer, whose name and email are at most 256 characters each) and its message (a
 * title of at most 256 characters, the run's name and namespace and three trailers) come to
 * under 5 KiB. A branch head larger than this is not the operator's, whatever its last lines
 * say, and its message is never read.
 */
export const OPERATOR_COMMIT_MAX_BYTES = 64 * 1024;

function publishFailed(detail: string): RunFailure {
  return new RunFailure(REASONS.PublishFailed, `Publishing failed: ${detail}`);
}

function scrub(text: string, token: string | undefined): string {
  return redactSecrets(text.replace(/\/\/[^/@\s]+@/g, '//***@'), [token])
    .trim()
    .slice(-1500);
}

async function git(
  clone: PublishClone,
  args: string[],
  options: {
    input?: string;
    env?: NodeJS.ProcessEnv;
    label?: string;
    fileSizeLimit?: number;
    /** Said after a failure's detail, in parentheses: what git was doing, when the command does not say. */
    why?: string;
    /** What running out of memory means here, said after the shared message (git-runner.ts). */
    outOfMemory?: (error: GitOutOfMemoryError) => string;
    /** The most git may print (default OUTPUT_MAX_BYTES): past it git is stopped and the publish fails. */
    maxOutputBytes?: number;
    /** Said after that failure's detail instead of `why`: what so much output means. */
    printedTooMuch?: string;
  } = {},
): Promise<string> {
  const label = options.label ?? args[0]!;
  const maxOutputBytes = options.maxOutputBytes ?? OUTPUT_MAX_BYTES;
  const chunks: Buffer[] = [];
  let printed = 0;
  const exit = await runGit({
    launch: clone.launch ?? launchHere,
    cwd: clone.dir,
    env: { ...clone.env, ...options.env },
    args: [...SAFE_GIT_CONFIG, ...args],
    memoryBytes: gitMemory(clone),
    fileBytes: options.fileSizeLimit,
    timeoutMs: GIT_TIMEOUT_MS,
    input: options.input,
    onStdout: (chunk) => {
      printed += chunk.length;
      if (printed > maxOutputBytes) return false;
      chunks.push(chunk);
      return true;
    },
    label,
  }).catch((error: unknown) => {
    if (LauncherLostError.isInstance(error)) throw error;
    if (GitOutOfMemoryError.isInstance(error)) throw publishFailed(options.outOfMemory?.(error) ?? error.message);
    // Its code, never a spawn error's message: node's quotes the environment value it refused.
    throw publishFailed(GitNotStartedError.isInstance(error) ? error.message : 'git could not start');
  });
  // Before the exit: git was stopped for it. Read whole or not at all: a tail is not what git said.
  if (printed > maxOutputBytes) {
    const why = options.printedTooMuch ?? options.why;
    throw publishFailed(`git ${label} printed more than ${formatBytes(maxOutputBytes)} and was stopped${why ? ` (${why})` : ''}`);
  }
  if (exit.code === 0) return Buffer.concat(chunks, printed).toString('utf8');
  const detail = exit.timedOut
    ? `git ${label} timed out`
    : exit.signal
      ? `git ${label} was stopped by ${exit.signal}`
      : `git ${label} failed: ${scrub(exit.stderr, clone.token) || `exit ${exit.code}`}`;
  throw publishFailed(`${detail}${options.why ? ` (${options.why})` : ''}`);
}

/** The memory each git of the clone's may have (git-limits.ts). */
const gitMemory = (clone: PublishClone) => clone.maxGitMemoryBytes ?? GIT_MEMORY_LIMIT_BYTES;

export interface RemoteLookup {
  /** The branch on the remote (its commit and that commit's message), or undefined when there is none. */
  branch: RemoteBranch | undefined;
  /** The branch the remote's HEAD names (its default branch), when it says. */
  defaultBranch: string | undefined;
  /**
   * The ref the run's revision names on the remote (`refs/heads/release`, `refs/tags/v1`), when
   * it names one: as the clone's fetch resolves it (remote-refs.ts), so a tag is found before a
   * branch of the same name; undefined for a commit id, no revision, or a name the remote no
   * longer has (pullRequestBase tells these apart by the revision).
   */
  revisionRef: string | undefined;
}

/** The branch the remote's HEAD names: only the symref line of HEAD itself, not of any ref ending in `/HEAD`. */
function headBranch(listing: string): string | undefined {
  for (const line of listing.split('\n')) {
    const named = /^ref: refs\/heads\/(\S+)\tHEAD$/.exec(line)?.[1];
    if (named) return named;
  }
  return undefined;
}

/**
 * Looks the branch, the remote's default branch and (given) the run's revision up in one
 * ls-remote. The head commit's message is fetched only when that commit is not `ours` (a
 * retry finds its own commit there and needs nothing more), and only the commit object: a
 * branch someone filled with gigabytes
 * costs no download where the server filters (git ignores the filter, with a warning, where
 * it does not). The head is anyone's who may push: a branch named as the run will publish
 * (chamvi/{run} by default) can be there first. Its message is read only when the head is a
 * commit the size of the operator's own; any other head fails PublishFailed, and is left alone.
 *
 * git prints every ref whose name ends as a pattern does (`refs/heads/zz/…/HEAD` for `HEAD`),
 * and anyone who may push can make a megabyte of those: the listing is read whole (past
 * LS_REMOTE_MAX_BYTES the publish fails) and only the exact names are taken from it. A listing
 * cut to its tail once lost both HEAD's line and the branch's, and the run's "new" branch was
 * pushed onto main.
 */
export async function lookUpRemote(clone: PublishClone, branch: string, ours: string, revision?: string): Promise<RemoteLookup> {
  const ref = `refs/heads/${branch}`;
  const revisionPattern = revision !== undefined && !isCommitId(revision) ? [revision] : [];
  const listing = await git(clone, ['ls-remote', '--symref', '--', 'origin', 'HEAD', ref, ...revisionPattern], {
    label: 'ls-remote',
    maxOutputBytes: LS_REMOTE_MAX_BYTES,
    printedTooMuch:
      `the remote has so many refs whose names end in /HEAD or as branch ${branch}${revisionPattern.length ? ` or revision ${revision}` : ''} ` +
      'that their list is more than the operator reads, so neither the default branch nor the branch could be told and nothing was pushed; ' +
      'delete those refs',
  });
  const refs = parseLsRemote(listing);
  const defaultBranch = headBranch(listing);
  const revisionRef = revisionPattern.length ? refNamedBy(refs, revisionPattern[0]!) : undefined;
  const commit = refs.get(ref);
  if (commit === undefined) return { branch: undefined, defaultBranch, revisionRef };
  if (commit === ours) return { branch: { commit, message: '' }, defaultBranch, revisionRef };
  // The download kept as one pack file, which the file-size limit bounds (git would otherwise
  // explode a small one into loose objects, each bounded on its own). index-pack reads each
  // commit and tree of it whole, to hash it, whatever its pack costs: the memory limit
  // (git-limits.ts) stops a head of hundreds of MB there.
  await git(clone, ['-c', 'fetch.unpackLimit=1', 'fetch', '-q', '--depth', '1', '--filter=tree:0', '--no-tags', 'origin', '--', ref], {
    label: 'fetch',
    fileSizeLimit: clone.maxFetchBytes,
    why: `fetching the head of branch ${branch} to read its commit message; a download over ${formatBytes(clone.maxFetchBytes)} is stopped`,
    outOfMemory: (error) =>
      notOurs(branch, commit, `(or what the server sent with it) holds an object too large to read: ${error.message}`),
  });
  // That fetch made origin a promisor remote (remote.origin.promisor and .partialclonefilter
  // in the clone's config), from which git fetches any object it misses, on demand, without
  // the bound above and once per object: the push did, for the trees and files of the head it
  // moves the branch from (a thin pack's bases), however large. Nothing here needs an object
  // the filter left out, so origin is made a plain remote again. (GIT_NO_LAZY_FETCH would say
  // so for one command, from git 2.44 only.)
  for (const key of ['remote.origin.promisor', 'remote.origin.partialclonefilter'])
    await git(clone, ['config', '--unset-all', key], { label: 'config', why: 'making origin a plain remote again after a filtered fetch' });
  // What was fetched, from the object's header alone (git reads no more of it to say its id,
  // type and size). The message must be the listed commit's, whose id the push's lease then
  // names: a branch moved between the two reads is read again at the job's retry.
  const [fetched, type, size] = (
    await git(clone, ['cat-file', '--batch-check=%(objectname) %(objecttype) %(objectsize)'], { input: 'FETCH_HEAD\n', label: 'cat-file' })
  )
    .trim()
    .split(' ');
  if (fetched !== commit) throw new Error(`branch ${branch} moved while it was read (${commit} listed, ${fetched} fetched); trying again`);
  if (type !== 'commit') throw publishFailed(notOurs(branch, commit, `is a ${type}, not a commit`));
  if (Number(size) > OPERATOR_COMMIT_MAX_BYTES) {
    throw publishFailed(
      notOurs(
        branch,
        commit,
        `is a commit of ${formatBytes(Number(size))}, larger than any the operator makes (${formatBytes(OPERATOR_COMMIT_MAX_BYTES)})`,
      ),
    );
  }
  const message = await git(clone, ['log', '-1', '--format=%B', commit]);
  return { branch: { commit, message }, defaultBranch, revisionRef };
}

/** The refusal of a branch whose head cannot be the operator's: one line, naming no more of the head than its id. */
function notOurs(branch: string, commit: string, what: string): string {
  return (
    `branch ${branch} already exists at ${commit.slice(0, 12)}, whose head ${what}, so the operator did not make it; ` +
    'it is left alone: set spec.publish.branch to a new branch, or delete that one'
  );
}

export interface CommitRequest {
  diff: string;
  message: string;
  author: { name: string; email: string };
  /** ISO time, for author and committer: fixed, so the commit is the same on every try. */
  date: string;
}

/** A `git apply` that ran out of its memory: what the estimate did not foresee (apply-budget.ts). */
const applyOutOfMemory = (error: GitOutOfMemoryError) => applyOutOfMemoryRefusal(error.message);

/** Why the diff is not applied, from git's list of its patches and the files of HEAD's tree they read (apply-diff.ts). */
async function listedRefusal(clone: PublishClone, diff: string): Promise<string | undefined> {
  const numstat = await git(clone, ['apply', '--numstat', '-z', '-'], { input: diff, label: 'apply', outOfMemory: applyOutOfMemory });
  const limits = { timeoutMs: GIT_TIMEOUT_MS, maxGitMemoryBytes: gitMemory(clone), index: true };
  return listedPatchesRefusal(diff, numstat) ?? (await applyCostRefusalIn(clone.dir, diff, numstat, clone.launch ?? launchHere, limits));
}

/** Applies the diff to HEAD's tree and commits it on HEAD; returns the commit (not checked out, no branch moved). */
export async function commitDiff(clone: PublishClone, request: CommitRequest): Promise<string> {
  // The diff is what a model wrote: git's default refusals hold (no path outside the tree, none
  // through a symlink), git must change exactly the files the approver was shown, and what it
  // would hold and search to apply it must fit (apply-budget.ts).
  const refusal = diffRefusal(request.diff) ?? (await listedRefusal(clone, request.diff));
  if (refusal) throw publishFailed(refusal);
  await git(clone, ['apply', '--index', '--whitespace=nowarn', '-'], {
    input: request.diff,
    label: 'apply',
    outOfMemory: applyOutOfMemory,
  });
  const tree = (await git(clone, ['write-tree'])).trim();
  const identity = {
    GIT_AUTHOR_NAME: request.author.name,
    GIT_AUTHOR_EMAIL: request.author.email,
    GIT_AUTHOR_DATE: request.date,
    GIT_COMMITTER_NAME: request.author.name,
    GIT_COMMITTER_EMAIL: request.author.email,
    GIT_COMMITTER_DATE: request.date,
  };
  return (
    await git(clone, ['-c', 'commit.gpgSign=false', 'commit-tree', tree, '-p', 'HEAD', '-F', '-'], {
      input: request.message,
      env: identity,
      label: 'commit-tree',
    })
  ).trim();
}

/**
 * Pushes the commit to the branch: a new branch (without `from`), or one moved only if it still
 * points at `from`. Both are leases: a branch decided new must not exist when the push lands
 * (an empty expected value), so a branch made meanwhile, or one the lookup did not see, is
 * never moved by a "create", fast-forward or not.
 */
export async function pushBranch(clone: PublishClone, commit: string, branch: string, from?: string): Promise<void> {
  const ref = `refs/heads/${branch}`;
  await git(clone, ['push', '-q', '--no-verify', `--force-with-lease=${ref}:${from ?? ''}`, 'origin', `${commit}:${ref}`], {
    label: 'push',
    why: from
      ? `moving branch ${branch} only from ${from.slice(0, 12)}, where the lookup saw it`
      : `creating branch ${branch}, which the lookup did not find: a branch that exists by then is not moved`,
  });
}
