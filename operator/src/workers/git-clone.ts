// The shallow clone a run starts from, made in the worker (the sandbox has no network and
// never sees a credential).
//
// - Only a CheckedRepositoryUrl is cloned, and git gets exactly that string (security #11.2).
// - The token reaches git through GIT_ASKPASS and an environment variable: never on a command
//   line (visible in ps) and never in a URL (visible in logs and errors). The askpass answers
//   only git's prompts for the checked origin, redirects are off and git may speak only the
//   checked URL's protocol, so no other host and no downgraded connection gets it (#11.4).
// - The revision is a git ref name or nothing (git-ref-name.ts): git reads a fetch's argument
//   as a refspec, and `a:refs/replace/<id>` would write into the clone, whose .git the clone
//   cache hands to later runs. Replace refs are ignored all the same (GIT_NO_REPLACE_OBJECTS).
// - The clone lands on the operator's disk, shared by every run of the replica, so it is
//   bounded before it lands (#11.7): the download by a file-size limit, the checkout by the
//   sum of the commit's file sizes and its entry count, read from the tree before checkout.
// - git runs in the operator's container, reading objects the repository's owner made: each git
//   process is held to maxGitMemoryBytes (git-limits.ts, git-runner.ts), so a commit or tree of
//   hundreds of MB, a pack of a few, fails the clone instead of the container.
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repositoryOrigin, repositoryUrlParts, type RepositoryUrlParts } from '../reconcile/canonical-repository-url.ts';
import type { CheckedRepositoryUrl } from '../reconcile/allow-repo.ts';
import { FAILURE_MESSAGES } from '../api/failure-messages.ts';
import { refNameProblem } from '../api/git-ref-name.ts';
import { InvalidRevisionError } from '../api/invalid-revision-error.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { launchHere, LauncherLostError, type Launch } from './process-launcher.ts';
import { GIT_MEMORY_LIMIT_BYTES, LS_REMOTE_MAX_BYTES, localServerConfig } from './git-limits.ts';
import { GitOutOfMemoryError, runGit } from './git-runner.ts';
import { GitNotStartedError } from './errors/git-not-started-error.ts';
import { isTokenShaped, TOKEN_SHAPE } from './token-shape.ts';
import { formatBytes } from './format-bytes.ts';
import { isolatedGitEnvironment } from './isolated-git-environment.ts';
import { commitForRevision, parseLsRemote, refFetched, revisionRefIn, type NamedCommit } from './remote-refs.ts';
import { clonePrefix } from './stale-clones.ts';

/** The run fails CloneFailed with this (the detail never holds the token: git's output is scrubbed). */
function cloneFailed(detail: string): RunFailure {
  return new RunFailure(REASONS.CloneFailed, FAILURE_MESSAGES.cloneFailed(detail));
}

/** A clone that failed (the run fails CloneFailed), as opposed to an I/O error of the worker. */
export function isCloneFailure(error: unknown): error is RunFailure {
  return RunFailure.isInstance(error) && error.reason === REASONS.CloneFailed;
}

/** The operator's clone settings, as the workers get them (the config reaches AgentDependencies). */
export interface ClonePolicy {
  /** Re-checked by the prepare job right before the clone. */
  allowRepo: readonly string[];
  maxCheckoutBytes: number;
  maxCheckoutFiles: number;
  /** Each git's heap (git-limits.ts); default GIT_MEMORY_LIMIT_BYTES. */
  maxGitMemoryBytes?: number | undefined;
}

export interface CloneRequest {
  url: CheckedRepositoryUrl;
  revision?: string | undefined;
  token?: string | undefined;
  maxCheckoutBytes: number;
  maxCheckoutFiles: number;
  timeoutMs?: number;
  /** Starts git (process-launcher.ts); default: from this process. */
  launch?: Launch;
  /** The memory each git process may have (git-limits.ts); default GIT_MEMORY_LIMIT_BYTES. */
  maxGitMemoryBytes?: number;
}

/** The user name sent with the token; GitHub, GitLab and Gitea accept any name with a token. */
const TOKEN_USER = 'x-access-token';

// The askpass answers a prompt only when it is, byte for byte, git's prompt for the checked
// origin (credential.c: "<Username|Password> for '<protocol>://[<user>@]<host[:port]>': ").
// Any other prompt (another host after some redirect, http instead of https) gets nothing.
const ASKPASS = `#!/bin/sh
if [ "$1" = "$CHAMVI_GIT_USERNAME_PROMPT" ]; then echo "$CHAMVI_GIT_USER"
elif [ "$1" = "$CHAMVI_GIT_PASSWORD_PROMPT" ]; then printf '%s\\n' "$CHAMVI_GIT_TOKEN"
else echo "chamvi askpass: no credential for: $1" >&2; exit 1
fi
`;

// In-tree .gitattributes can make the checkout larger than the blobs (eol=crlf doubles a file
// of newlines, `ident` turns each 4-byte $Id$ into 47 bytes, working-tree-encoding=UTF-32
// quadruples text). $GIT_DIR/info/attributes outranks them: the checkout is the blobs, byte for
// byte, so the size summed from the tree is the size written. It stays in the sandbox's .git,
// where git status then agrees with the files.
const EXACT_CHECKOUT_ATTRIBUTES = '* -text -eol -ident -filter -working-tree-encoding\n';

/** Extra room for the pack's trees and headers over the blobs it carries. */
export const PACK_SLACK_BYTES = 16 * 1024 * 1024;

function scrub(text: string, token: string | undefined): string {
  let out = text.replace(/\/\/[^/@\s]+@/g, '//***@');
  if (token) out = out.split(token).join('***');
  return out.trim().slice(-2000);
}

interface GitRun {
  config: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  token: string | undefined;
  /** RLIMIT_FSIZE for git and its children: no single file it writes grows past this. */
  fileSizeLimit: number;
  /** RLIMIT_DATA for git and each of its children (git-limits.ts). */
  memoryLimit: number;
  /** What failed, in messages: "git <label> failed" (default: the git command). */
  label?: string;
  launch: Launch;
}

/** Runs git under its file-size and memory limits (git-runner.ts). `onStdout` gets stdout; it may return false to stop git early. */
async function git(run: GitRun, args: string[], onStdout?: (chunk: Buffer) => boolean): Promise<void> {
  const label = run.label ?? args[0]!;
  const exit = await runGit({
    launch: run.launch,
    cwd: run.cwd,
    env: run.env,
    args: [...run.config, ...args],
    memoryBytes: run.memoryLimit,
    fileBytes: run.fileSizeLimit,
    timeoutMs: run.timeoutMs,
    onStdout,
    label,
  }).catch((error: unknown) => {
    // A lost launcher says nothing about the repository: the job is retried.
    if (LauncherLostError.isInstance(error)) throw error;
    if (GitOutOfMemoryError.isInstance(error)) throw cloneFailed(outOfMemory(error));
    // Its code, never a spawn error's message: node's quotes the environment value it refused.
    throw cloneFailed(GitNotStartedError.isInstance(error) ? error.message : 'git could not start');
  });
  if (exit.code === 0 || exit.stopped) return;
  if (exit.signal) throw cloneFailed(`git ${label} timed out`);
  throw cloneFailed(`git ${label} failed: ${scrub(exit.stderr, run.token) || `exit ${exit.code}`}`);
}

/** Why the clone failed when git ran out of its memory: what the repository holds, and what to do. */
function outOfMemory(error: GitOutOfMemoryError): string {
  return (
    `${error.message}: the repository holds an object too large to read whole (a commit or tree that large, or a large file ` +
    'sent as a delta of another); use a smaller repository or revision'
  );
}

export interface TreeSize {
  bytes: number;
  entries: number;
  /** The walk stopped at maxCheckoutFiles: bytes and entries are lower bounds. */
  cut: boolean;
}

/**
 * What ls-tree prints of each entry: its type and size, never its path. A path is the names of
 * every directory above it, and trees shared many times over make a 20 KB repository list
 * gigabytes of them (400 nested directories of 255-byte names over one fan-out: 249 649 entries,
 * each path 100 KB); without them each entry is a few bytes, so the listing is bounded by the
 * entries it counts. `--format` is git 2.36 or later (the images have 2.39).
 */
const TREE_ENTRY_FORMAT = '--format=%(objecttype) %(objectsize)';

/** One entry as TREE_ENTRY_FORMAT prints it: a size for a blob, `-` for a tree or a submodule. */
const TREE_ENTRY = /^(?:blob (\d+)|(?:tree|commit) -)$/;

/** The longest record TREE_ENTRY matches: `commit -`, or `blob ` and a 64-bit size. */
const TREE_ENTRY_MAX_CHARACTERS = 'blob '.length + 20;

/**
 * The size of a commit's checkout from its tree (`git ls-tree -r -t`, types and sizes only):
 * the blob sizes summed, and the entries counted (files, symlinks, submodules and directories:
 * each takes an inode). Stops reading once there are more entries than allowed, so a tree that
 * fans out exponentially (a "git bomb") costs no more than maxCheckoutFiles short records. A
 * record that is not an entry fails the clone: a size read as NaN would pass every limit.
 */
async function measureTree(run: GitRun, treeish: string, maxEntries: number): Promise<TreeSize> {
  const size: TreeSize = { bytes: 0, entries: 0, cut: false };
  let rest = '';
  let unexpected: string | undefined;
  await git(run, ['ls-tree', '-r', '-t', '-z', TREE_ENTRY_FORMAT, treeish], (chunk) => {
    const records = (rest + chunk.toString('latin1')).split('\0');
    rest = records.pop()!;
    if (rest.length > TREE_ENTRY_MAX_CHARACTERS) unexpected = rest;
    for (const record of unexpected === undefined ? records : []) {
      const entry = TREE_ENTRY.exec(record);
      if (!entry) {
        unexpected = record;
        break;
      }
      size.entries++;
      if (entry[1] !== undefined) size.bytes += Number(entry[1]);
      if (size.entries > maxEntries) {
        size.cut = true;
        return false;
      }
    }
    return unexpected === undefined;
  }).catch((error: unknown) => {
    throw isCloneFailure(error) && /unknown option .format/.test(error.message)
      ? cloneFailed('git ls-tree does not know --format: the clone measures trees with git 2.36 or later; install a newer git')
      : error;
  });
  if (unexpected !== undefined) {
    throw cloneFailed(
      `git ls-tree printed ${JSON.stringify(unexpected.slice(0, 40))}, not an entry's type and size, so the checkout was not measured`,
    );
  }
  return size;
}

/** After a failed fetch: did the pack being written reach the file-size limit? */
async function downloadCut(dir: string, limit: number): Promise<boolean> {
  const pack = join(dir, '.git', 'objects', 'pack');
  const names = await readdir(pack).catch(() => [] as string[]);
  for (const name of names) {
    const size = (await stat(join(pack, name)).catch(() => undefined))?.size ?? 0;
    if (size >= limit) return true;
  }
  return false;
}

/**
 * The token as git may get it, checked again here: the workers read it with readGitToken
 * (git-token.ts), which names the Secret in its refusal; a token from anywhere else that is not
 * one (a NUL made the spawn throw with the value in its message) must not reach git's environment.
 */
function givenToken(token: string | undefined): string | undefined {
  if (token !== undefined && !isTokenShaped(token)) throw cloneFailed(`the git token is not ${TOKEN_SHAPE}, so git was not given it`);
  return token?.trim();
}

/** Proxy variables git (curl) reads; only ever the operator's own, never a run's. */
const GIT_PROXY_VARIABLES = ['https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY', 'no_proxy', 'NO_PROXY'] as const;

/**
 * The environment git runs in for the checked URL: no system or user config, only the URL's
 * protocol, and (with a token) the askpass that answers only the checked origin's prompts.
 * `base` is a directory of the caller's, where the askpass script is written. Also what the
 * publish job pushes with (publish-git.ts).
 */
export async function gitEnvironment(parts: RepositoryUrlParts, given: string | undefined, base: string): Promise<NodeJS.ProcessEnv> {
  const token = givenToken(given);
  // PATH's absolute entries, no config, no replace refs (isolated-git-environment.ts): a
  // refs/replace/* ref in the repository (none should be there) cannot make the checkout, its
  // measured size or a pushed commit another tree than the id says.
  const env: NodeJS.ProcessEnv = {
    ...isolatedGitEnvironment(),
    HOME: base,
    // The checked URL's protocol and no other: also what curl may follow (CURLOPT_REDIR_PROTOCOLS).
    GIT_ALLOW_PROTOCOL: parts.scheme,
  };
  // An admin's private CA for the git server, set on the operator's container.
  if (process.env.GIT_SSL_CAINFO) env.GIT_SSL_CAINFO = process.env.GIT_SSL_CAINFO;
  // The admin's outbound proxy (the chart's proxy values), set on the operator's container.
  for (const name of GIT_PROXY_VARIABLES) if (process.env[name]) env[name] = process.env[name];
  if (token && (parts.scheme === 'https' || parts.scheme === 'http')) {
    const askpass = join(base, 'askpass.sh');
    await writeFile(askpass, ASKPASS);
    await chmod(askpass, 0o700);
    const origin = repositoryOrigin(parts);
    env.GIT_ASKPASS = askpass;
    env.CHAMVI_GIT_USER = TOKEN_USER;
    env.CHAMVI_GIT_USERNAME_PROMPT = `Username for '${origin}': `;
    env.CHAMVI_GIT_PASSWORD_PROMPT = `Password for '${parts.scheme}://${TOKEN_USER}@${origin.slice(parts.scheme.length + 3)}': `;
    env.CHAMVI_GIT_TOKEN = token;
  }
  return env;
}

/**
 * Config every git run with a credential gets: no ext::, no hooks, no redirect (another origin),
 * no credential helper, no http transfer that stalls.
 */
export const SAFE_GIT_CONFIG: readonly string[] = [
  '-c',
  'protocol.ext.allow=never',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'advice.detachedHead=false',
  // Not even the initial redirect git follows by default: a redirect is another origin.
  '-c',
  'http.followRedirects=false',
  '-c',
  'credential.helper=',
  // A server that accepts the connection and then sends nothing would hold git-remote-https
  // (and the token in its environment) until the job's timeout kills it: curl gives up after
  // a minute without a byte. ssh and git:// have no such setting; the timeout ends them.
  '-c',
  'http.lowSpeedLimit=1',
  '-c',
  'http.lowSpeedTime=60',
];

/** Clones into a new temporary directory and returns it (with .git, for git_diff in the sandbox). */
export async function cloneRepository(request: CloneRequest): Promise<string> {
  return (await cloneMeasured(request)).dir;
}

/** A clone and the size of its checkout, as measured from its tree before it was checked out. */
export interface MeasuredClone {
  dir: string;
  size: TreeSize;
  /**
   * The ref the revision named on the remote as the fetch took it (`refs/heads/release`,
   * `refs/tags/release`: a tag before a branch, git's rules); undefined for no revision, a
   * commit id, or a FETCH_HEAD line this git describes otherwise. Publishing takes the pull
   * request's base from it, and refuses a revision that names another ref by then.
   */
  revisionRef: string | undefined;
}

/**
 * What every git run for a request starts from: the checked URL's parts, a new directory of
 * this process's (for the askpass script, and the clone), the token git may use (https and
 * http only) and the environment that gives it to the checked origin alone.
 */
async function gitSetting(request: CloneRequest): Promise<{ base: string; token: string | undefined; env: NodeJS.ProcessEnv }> {
  const parts = repositoryUrlParts(request.url);
  if (!parts) throw cloneFailed(`repository ${JSON.stringify(request.url)} is not a canonical URL`);
  // Checked before the directory exists: a refused token leaves nothing behind.
  const token = parts.scheme === 'https' || parts.scheme === 'http' ? givenToken(request.token) : undefined;
  // Named by this process, so that the next one can tell a clone left by a killed process (stale-clones.ts).
  const base = await mkdtemp(join(tmpdir(), clonePrefix(process.pid)));
  return { base, token, env: await gitEnvironment(parts, token, base) };
}

/**
 * The revision to fetch, checked again here (the schema checks it before a run is accepted):
 * only a ref name, which git cannot read as a refspec that writes refs (`a:b`, `*`, `+`) or as
 * an option, and which holds no NUL to make the spawn throw. InvalidSpec otherwise, at once.
 */
export function fetchedRevision(revision: string | undefined): string {
  if (revision === undefined) return 'HEAD';
  const problem = refNameProblem(revision);
  if (problem) throw new InvalidRevisionError({ revision, problem });
  return revision;
}

/** cloneRepository, with the checkout's size (what the clone cache checks against the limits when it hands the tree out again). */
export async function cloneMeasured(request: CloneRequest): Promise<MeasuredClone> {
  const revision = fetchedRevision(request.revision);
  const { base, token, env } = await gitSetting(request);
  const dir = join(base, 'repo');
  const run: GitRun = {
    config: [
      ...SAFE_GIT_CONFIG,
      ...localServerConfig(request.url),
      // Always keep the download as one pack file, which the file-size limit bounds (below
      // the unpack limit git would explode it into loose objects, each bounded on its own).
      '-c',
      'fetch.unpackLimit=1',
      '-c',
      'transfer.unpackLimit=1',
      // No reflog: it would carry the fetch and the checkout (the operator's identity and the
      // clone's time) into the archive, which the clone cache hands to later runs.
      '-c',
      'core.logAllRefUpdates=false',
    ],
    cwd: base,
    env,
    timeoutMs: request.timeoutMs ?? 300_000,
    token,
    fileSizeLimit: request.maxCheckoutBytes + PACK_SLACK_BYTES,
    memoryLimit: request.maxGitMemoryBytes ?? GIT_MEMORY_LIMIT_BYTES,
    launch: request.launch ?? launchHere,
  };
  try {
    // No template: git's sample hooks, description and info/exclude are half the files of a
    // small repository's .git, and the archive carries them into every sandbox, whose import
    // writes each one (docs/benchmarks.md). None of them acts: the hooks are samples that
    // never run (core.hooksPath), and info/exclude holds only comments.
    await git(run, ['init', '-q', '--template=', dir]);
    const inRepo: GitRun = { ...run, cwd: dir };
    await git(inRepo, ['remote', 'add', 'origin', '--', request.url]);
    // One fetch for every kind of revision (a branch, a tag, a commit, the remote's HEAD), so a
    // cut download leaves its pack behind to be recognised; the checkout is detached. An empty
    // --refmap: no refs/remotes/origin/<revision>, which would name the revision in the archive.
    try {
      // Reported as the clone it is: "git clone failed: fatal: ...".
      await git({ ...inRepo, label: 'clone' }, ['fetch', '-q', '--depth', '1', '--no-tags', '--refmap=', 'origin', '--', revision]);
    } catch (error) {
      if (isCloneFailure(error) && (await downloadCut(dir, run.fileSizeLimit))) {
        throw cloneFailed(
          `the repository's download grew past ${formatBytes(run.fileSizeLimit)} (maxCheckoutBytes ${formatBytes(request.maxCheckoutBytes)} ` +
            'and room for its trees) and was stopped; use a smaller repository or revision, or ask an admin to raise maxCheckoutBytes',
        );
      }
      throw error;
    }
    const size = await measureTree(inRepo, 'FETCH_HEAD', request.maxCheckoutFiles);
    if (size.cut) {
      throw cloneFailed(
        `the checkout would have more than ${request.maxCheckoutFiles} files and directories, over maxCheckoutFiles ${request.maxCheckoutFiles}; ` +
          'use a smaller repository or revision, or ask an admin to raise maxCheckoutFiles',
      );
    }
    if (size.bytes > request.maxCheckoutBytes) {
      throw cloneFailed(
        `the checkout would be ${formatBytes(size.bytes)} in ${size.entries} files and directories, over maxCheckoutBytes ` +
          `${formatBytes(request.maxCheckoutBytes)}; use a smaller repository or revision, or ask an admin to raise maxCheckoutBytes`,
      );
    }
    await mkdir(join(dir, '.git', 'info'), { recursive: true });
    await writeFile(join(dir, '.git', 'info', 'attributes'), EXACT_CHECKOUT_ATTRIBUTES);
    await git(inRepo, ['checkout', '-q', 'FETCH_HEAD']);
    // FETCH_HEAD names the revision asked for ("branch '<revision>' of <url>"), and the clone
    // cache keys the archive by URL, commit and tag object, never by that name: a later run of
    // the same commit, in another namespace, would read this run's revision (a hidden branch's
    // name) in its .git. HEAD, detached at the commit, is all the sandbox's git needs
    // (rev-parse, diff, status). Read first for the ref the fetch took, which the run's state keeps.
    const fetchHead = await readFile(join(dir, '.git', 'FETCH_HEAD'), 'latin1').catch(() => '');
    await rm(join(dir, '.git', 'FETCH_HEAD'), { force: true });
    return { dir, size, revisionRef: refFetched(fetchHead, request.revision) };
  } catch (error) {
    // The caller only owns the directory once it is returned: a failed clone (a partial
    // checkout, the askpass script) must not stay behind in the worker's temp dir.
    await rm(base, { recursive: true, force: true });
    throw error;
  }
}

/** A commit the remote names for a revision, and the ref it names it by (MeasuredClone's revisionRef, as a clone would have taken it). */
export interface RemoteRevision extends NamedCommit {
  ref: string | undefined;
}

/**
 * The commit the remote names for the request's revision, and the annotated tag object it goes
 * through if any (remote-refs.ts), asked the way the clone asks: the checked URL, its credential
 * through the askpass, the same git config. Undefined when the remote names none or lists more
 * than LS_REMOTE_MAX_BYTES; CloneFailed when the remote refuses, as a fetch would be refused;
 * InvalidSpec for a revision the clone would refuse.
 */
export async function remoteCommit(request: CloneRequest): Promise<RemoteRevision | undefined> {
  fetchedRevision(request.revision);
  const { base, token, env } = await gitSetting(request);
  try {
    const run: GitRun = {
      config: [...SAFE_GIT_CONFIG],
      cwd: base,
      env,
      timeoutMs: request.timeoutMs ?? 60_000,
      token,
      fileSizeLimit: 1024 * 1024,
      memoryLimit: request.maxGitMemoryBytes ?? GIT_MEMORY_LIMIT_BYTES,
      launch: request.launch ?? launchHere,
    };
    const chunks: Buffer[] = [];
    let bytes = 0;
    await git(run, ['ls-remote', '--', request.url], (chunk) => {
      bytes += chunk.length;
      if (bytes <= LS_REMOTE_MAX_BYTES) chunks.push(chunk);
      return bytes <= LS_REMOTE_MAX_BYTES;
    });
    if (bytes > LS_REMOTE_MAX_BYTES) return undefined;
    const refs = parseLsRemote(Buffer.concat(chunks).toString('latin1'));
    const named = commitForRevision(refs, request.revision);
    return named && { ...named, ref: revisionRefIn(refs, request.revision) };
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}
