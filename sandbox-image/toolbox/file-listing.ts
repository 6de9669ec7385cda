// list_files and glob: the files of the workspace, git-aware (tracked and untracked, not
// ignored unless asked) with `git ls-files` in a repository, a directory walk otherwise;
// sorted and bounded. A repository inside another (an untracked clone, a submodule) is listed
// with its own `git ls-files` and its own ignore rules: the outer repository shows it only as
// one entry, `vendor/lib/` or a gitlink, which is a directory, not a file. git runs with the
// directory as its work tree whatever the repository's config says (core.worktree=/usr would
// list /usr), and for at most MAX_NESTED_REPOSITORIES of them per call; past that, one git run
// each would cost more than the listing, and the rest are walked (their ignore rules unread).
// grep with git grep, which stops at a nested repository, searches the files listed there by
// name, so it finds what list_files shows. A nested directory is entered only when it is the
// directory it names (no symlink on the way, no `..`), and the whole listing, every git run and
// walk, shares one deadline.
import { existsSync } from 'node:fs';
import { lstat, readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { FileListResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { LIST_DEFAULT_RESULTS, LIST_MAX_RESULTS } from './contract/limits.ts';
import { leadingWithinAnswerBytes } from './answer-entries.ts';
import { gitEnvironment, HELPER_TIMEOUT_MS, streamRecords } from './child-process.ts';
import { findHelper } from './helper-programs.ts';
import { compileGlob } from './contract/glob-pattern.ts';
import { guardWorkspacePath } from './path-guard.ts';
import { SortedSelection } from './sorted-selection.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

export async function listFiles(context: ToolboxContext, input: ToolInput<'list_files'>): Promise<FileListResult> {
  const base = await guardDirectory(context, input.path);
  const selection = new SortedSelection(Math.min(input.limit ?? LIST_DEFAULT_RESULTS, LIST_MAX_RESULTS));
  await forEachFile(context, base, Boolean(input.includeIgnored), (file) => selection.add(file.path));
  return finish(context, selection);
}

export async function glob(context: ToolboxContext, input: ToolInput<'glob'>): Promise<FileListResult> {
  const base = await guardDirectory(context, input.path);
  const written = input.pattern.replace(/^\.\//, '');
  const pattern = compileGlob(written, { escapes: true });
  const prefix = base === '' ? '' : `${base}/`;
  const selection = new SortedSelection(Math.min(input.limit ?? LIST_DEFAULT_RESULTS, LIST_MAX_RESULTS));
  await forEachFile(context, base, Boolean(input.includeIgnored), (file) => {
    const relative = file.path.slice(prefix.length);
    // A pattern also names the path it spells, as a git pathspec does: `app/[id]/page.tsx` finds
    // that file, which its class `[id]` (one of i or d) alone would miss.
    if (pattern.test(relative) || relative === written) selection.add(file.path);
  });
  return finish(context, selection);
}

async function guardDirectory(context: ToolboxContext, inputPath: string | undefined): Promise<string> {
  const target = await guardWorkspacePath(context, inputPath ?? '', { allowDenied: true });
  const stats = await lstat(target.real).catch(() => undefined);
  if (!stats) throw new ToolboxError('NOT_FOUND', `${inputPath} does not exist; list its parent directory`);
  if (!stats.isDirectory()) throw new ToolboxError('INVALID_INPUT', `${inputPath} is a file, not a directory; read it with read_file`);
  return target.relative;
}

/** Drops listed files that no longer exist (deleted but still tracked), on the final page only. */
async function finish(context: ToolboxContext, selection: SortedSelection): Promise<FileListResult> {
  const { items, truncated } = selection.result();
  const present = await Promise.all(
    items.map((file) =>
      lstat(path.join(context.realRoot, file)).then(
        () => true,
        () => false,
      ),
    ),
  );
  const files = items.filter((_, index) => present[index]);
  const kept = leadingWithinAnswerBytes(files);
  return { files: files.slice(0, kept), truncated: truncated || kept < files.length };
}

/** git runs per call for repositories nested in the one listed (some milliseconds each). */
export const MAX_NESTED_REPOSITORIES = 64;

/** A file a listing found. */
export interface ListedFile {
  /** Relative to the root, as results show it (a name that is not UTF-8 shows U+FFFD). */
  path: string;
  /** The same path as bytes, as git printed it: the name the file has. Walked: `path` encoded. */
  raw: Buffer;
  /** The directory (root-relative, '' for the root) of the repository that listed it; undefined: walked. */
  repository: string | undefined;
}

/** How long a listing may take, what stops it sooner, and who hears of the repositories it enters. */
export interface ListingOptions {
  /** The whole listing, every git run and walk in it (default HELPER_TIMEOUT_MS); past it: TIMEOUT. */
  timeoutMs?: number;
  /** Aborted: the listing stops (its git run killed) and throws the signal's reason. */
  signal?: AbortSignal;
  /**
   * Called with the directory (root-relative) of each repository other than the root's that the
   * listing enters, or walks in its place, before any of its files: grep tells from it whether a
   * listing that did not finish had found nested repositories at all.
   */
  onNestedRepository?: (directory: string) => void;
}

/** What one listing shares across the repositories it asks. */
interface Listing {
  includeIgnored: boolean;
  visit: (file: ListedFile) => void;
  /** Nested repositories that may still be listed with git. */
  nestedLeft: number;
  timeoutMs: number;
  /** Date.now() past which the listing gives up. */
  deadline: number;
  signal: AbortSignal | undefined;
  onNestedRepository: ((directory: string) => void) | undefined;
}

/** Visits each file list_files lists under `base` (root-relative, '' for the root), unsorted. */
export async function forEachFile(
  context: ToolboxContext,
  base: string,
  includeIgnored: boolean,
  visit: (file: ListedFile) => void,
  options: ListingOptions = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? HELPER_TIMEOUT_MS;
  const listing: Listing = {
    includeIgnored,
    visit,
    nestedLeft: MAX_NESTED_REPOSITORIES,
    timeoutMs,
    deadline: Date.now() + timeoutMs,
    signal: options.signal,
    onNestedRepository: options.onNestedRepository,
  };
  const repository = findHelper(context, 'git') ? enclosingRepository(context.realRoot, base) : undefined;
  if (repository) listing.onNestedRepository?.(repository);
  if (repository !== undefined && (await listRepository(context, repository, base, listing))) return;
  await walk(context.realRoot, base, listing);
}

/**
 * The innermost directory from `base` up to the root that holds a `.git`, or undefined: a
 * listing inside a nested repository asks that repository, since the outer one cannot see in.
 */
function enclosingRepository(realRoot: string, base: string): string | undefined {
  for (let directory = base; ; directory = path.posix.dirname(directory)) {
    if (directory === '.') directory = '';
    if (existsSync(path.join(realRoot, directory, '.git'))) return directory;
    if (directory === '') return undefined;
  }
}

/**
 * `git ls-files -t --stage` tags each entry: `? path` for an untracked one, `H mode object
 * stage\tpath` for a tracked one (S skip-worktree, M unmerged; always a letter). Without -t an
 * untracked file named `160000 0 0\t..` (write_file can make one) read as a gitlink named `..`.
 */
const TRACKED_ENTRY = /^[A-Za-z] ([0-7]{6}) [0-9a-f]+ [0-3]\t/;
const UNTRACKED_TAG = Buffer.from('? ');
const GITLINK_MODE = '160000';
/** Enough of a record for TRACKED_ENTRY: tag, mode, a SHA-256 object id, stage. */
const ENTRY_HEADER_MAX_BYTES = 80;

/** A `git ls-files -z -t --stage` record: the name as bytes, and the mode of a tracked entry; undefined for any other form. */
function readListedEntry(record: Buffer): { name: Buffer; mode: string | undefined } | undefined {
  if (record.subarray(0, UNTRACKED_TAG.length).equals(UNTRACKED_TAG))
    return { name: record.subarray(UNTRACKED_TAG.length), mode: undefined };
  // latin1 is one character per byte, so the match's length is the header's byte count.
  const tracked = TRACKED_ENTRY.exec(record.toString('latin1', 0, ENTRY_HEADER_MAX_BYTES));
  return tracked ? { name: record.subarray(tracked[0].length), mode: tracked[1] } : undefined;
}

/**
 * Lists `base` with the `git ls-files` of `repository` (both root-relative), then each
 * repository nested in it the same way. False when git fails there (not a usable repository,
 * e.g. a broken .git), so the caller walks instead.
 */
async function listRepository(context: ToolboxContext, repository: string, base: string, listing: Listing): Promise<boolean> {
  checkBounds(listing);
  const { includeIgnored, visit } = listing;
  const prefix = repository === '' ? '' : `${repository}/`;
  const pathspec = base === repository ? '.' : base.slice(prefix.length);
  const rawPrefix = Buffer.from(prefix);
  // A set: git may name an untracked nested repository more than once.
  const nested = new Set<string>();
  const args = [
    'ls-files',
    '-z',
    '-t',
    '--stage',
    '--cached',
    '--others',
    ...(includeIgnored ? [] : ['--exclude-standard']),
    '--',
    pathspec,
  ];
  const workTree = path.join(context.realRoot, repository);
  // Present: forEachFile asks git only when it found one.
  const git = findHelper(context, 'git')!;
  const outcome = await streamRecords(git, args, {
    cwd: workTree,
    // Named, not discovered: the work tree is this directory even if core.worktree says another
    // (the environment wins over config), and a .git that is no repository fails here instead of
    // git finding the outer one. A .git file (a submodule's `gitdir:` line) works as GIT_DIR too.
    env: { ...gitEnvironment(context), GIT_DIR: path.join(workTree, '.git'), GIT_WORK_TREE: workTree },
    separator: 0,
    maxRecordBytes: 4_096,
    timeoutMs: timeLeft(listing),
    signal: listing.signal,
    onRecord: (record) => {
      const entry = readListedEntry(record);
      if (!entry || entry.name.length === 0) return true;
      const file = entry.name.toString('utf8');
      // An untracked directory git names with a trailing `/` holds a repository of its own; a
      // tracked gitlink is a submodule's directory.
      if (entry.mode === undefined && file.endsWith('/')) nested.add(prefix + file.slice(0, -1));
      else if (entry.mode === GITLINK_MODE) nested.add(prefix + file);
      else visit({ path: prefix + file, raw: prefix === '' ? entry.name : Buffer.concat([rawPrefix, entry.name]), repository });
      return true;
    },
  }).catch((error: unknown) => {
    throw ToolboxError.isInstance(error) && error.code === 'TIMEOUT' ? listingTimeout(listing) : error;
  });
  listing.signal?.throwIfAborted();
  if (outcome.exitCode !== 0) return false;
  for (const directory of nested) {
    if (!(await isOwnDirectory(context.realRoot, directory))) continue;
    listing.onNestedRepository?.(directory);
    const inner = existsSync(path.join(context.realRoot, directory, '.git')) && listing.nestedLeft > 0;
    if (inner) listing.nestedLeft -= 1;
    if (!inner || !(await listRepository(context, directory, directory, listing))) {
      await walk(context.realRoot, directory, listing);
    }
  }
  return true;
}

/**
 * Whether `relative`, a nested repository's directory as git named it, is a real directory at
 * exactly that place: no `..` or empty segment, and no symlink on the way (a symlink put where
 * a submodule or one of its parents was may point out of the workspace). Its real path is then
 * itself, under the real root.
 */
async function isOwnDirectory(realRoot: string, relative: string): Promise<boolean> {
  if (relative.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) return false;
  const absolute = path.join(realRoot, relative);
  const stats = await lstat(absolute).catch(() => undefined);
  if (!stats?.isDirectory()) return false;
  return (await realpath(absolute).catch(() => undefined)) === absolute;
}

async function walk(realRoot: string, relative: string, listing: Listing): Promise<void> {
  checkBounds(listing);
  const entries = await readdir(path.join(realRoot, relative), { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (entry.name === '.git') continue;
    const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
    // Symlinked directories are listed as entries, never followed (they may point outside).
    if (entry.isDirectory()) await walk(realRoot, child, listing);
    else listing.visit({ path: child, raw: Buffer.from(child), repository: undefined });
  }
}

/** Throws when the listing was stopped or its deadline passed. */
function checkBounds(listing: Listing): void {
  listing.signal?.throwIfAborted();
  if (Date.now() >= listing.deadline) throw listingTimeout(listing);
}

/** Milliseconds left before the listing's deadline (checkBounds has made sure some are). */
function timeLeft(listing: Listing): number {
  return Math.max(1, listing.deadline - Date.now());
}

function listingTimeout(listing: Listing): ToolboxError {
  return new ToolboxError('TIMEOUT', `listing the files took longer than ${Math.round(listing.timeoutMs / 1000)} s; narrow the path`);
}
