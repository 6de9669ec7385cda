// list_files and glob: the files of the workspace, git-aware (tracked and untracked, not
// ignored unless asked) with `git ls-files` in a repository, a directory walk otherwise;
// sorted and bounded. A repository inside another (an untracked clone, a submodule) is listed
// with its own `git ls-files` and its own ignore rules: the outer repository shows it only as
// one entry, `vendor/lib/` or a gitlink, which is a directory, not a file. git runs with the
// directory as its work tree whatever the repository's config says (core.worktree=/usr would
// list /usr), and for at most MAX_NESTED_REPOSITORIES of them per call; past that, one git run
// each would cost more than the listing, and the rest are walked (their ignore rules unread).
// grep with git grep, which stops at a nested repository, searches the files listed there by
// name, so it finds what list_files shows.
import { existsSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { FileListResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { LIST_DEFAULT_RESULTS, LIST_MAX_RESULTS } from './contract/limits.ts';
import { leadingWithinAnswerBytes } from './answer-entries.ts';
import { findExecutable, gitEnvironment, streamRecords } from './child-process.ts';
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

/** What one listing shares across the repositories it asks. */
interface Listing {
  includeIgnored: boolean;
  visit: (file: ListedFile) => void;
  /** Nested repositories that may still be listed with git. */
  nestedLeft: number;
}

/** Visits each file list_files lists under `base` (root-relative, '' for the root), unsorted. */
export async function forEachFile(
  context: ToolboxContext,
  base: string,
  includeIgnored: boolean,
  visit: (file: ListedFile) => void,
): Promise<void> {
  const repository = findExecutable('git') ? enclosingRepository(context.realRoot, base) : undefined;
  const listing: Listing = { includeIgnored, visit, nestedLeft: MAX_NESTED_REPOSITORIES };
  if (repository !== undefined && (await listRepository(context, repository, base, listing))) return;
  await walk(context.realRoot, base, visit);
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

/** `git ls-files -s`: `mode object stage\tpath` for a tracked entry; an untracked one is only its path. */
const TRACKED_ENTRY = /^([0-7]{6}) [0-9a-f]+ [0-3]\t/;
const GITLINK_MODE = '160000';

/**
 * Lists `base` with the `git ls-files` of `repository` (both root-relative), then each
 * repository nested in it the same way. False when git fails there (not a usable repository,
 * e.g. a broken .git), so the caller walks instead.
 */
async function listRepository(context: ToolboxContext, repository: string, base: string, listing: Listing): Promise<boolean> {
  const { includeIgnored, visit } = listing;
  const prefix = repository === '' ? '' : `${repository}/`;
  const pathspec = base === repository ? '.' : base.slice(prefix.length);
  const rawPrefix = Buffer.from(prefix);
  const nested: string[] = [];
  const args = ['ls-files', '-z', '--stage', '--cached', '--others', ...(includeIgnored ? [] : ['--exclude-standard']), '--', pathspec];
  const workTree = path.join(context.realRoot, repository);
  const outcome = await streamRecords('git', args, {
    cwd: workTree,
    // Named, not discovered: the work tree is this directory even if core.worktree says another
    // (the environment wins over config), and a .git that is no repository fails here instead of
    // git finding the outer one. A .git file (a submodule's `gitdir:` line) works as GIT_DIR too.
    env: { ...gitEnvironment(), GIT_DIR: path.join(workTree, '.git'), GIT_WORK_TREE: workTree },
    separator: 0,
    maxRecordBytes: 4_096,
    onRecord: (record) => {
      const entry = record.toString('utf8');
      const tracked = TRACKED_ENTRY.exec(entry);
      const file = tracked ? entry.slice(tracked[0].length) : entry;
      if (file === '') return true;
      // An untracked directory git names with a trailing `/` holds a repository of its own; a
      // tracked gitlink is a submodule's directory.
      if (file.endsWith('/')) nested.push(prefix + file.slice(0, -1));
      else if (tracked?.[1] === GITLINK_MODE) nested.push(prefix + file);
      else {
        // The entry's prefix is ASCII (`mode object stage\t`): as many bytes as characters.
        const name = record.subarray(tracked ? tracked[0].length : 0);
        visit({ path: prefix + file, raw: prefix === '' ? name : Buffer.concat([rawPrefix, name]), repository });
      }
      return true;
    },
  });
  if (outcome.exitCode !== 0) return false;
  for (const directory of nested) {
    // Only a real directory: a symlink put where a submodule was may point out of the workspace.
    const stats = await lstat(path.join(context.realRoot, directory)).catch(() => undefined);
    if (!stats?.isDirectory()) continue;
    const inner = existsSync(path.join(context.realRoot, directory, '.git')) && listing.nestedLeft > 0;
    if (inner) listing.nestedLeft -= 1;
    if (!inner || !(await listRepository(context, directory, directory, listing))) {
      await walk(context.realRoot, directory, visit);
    }
  }
  return true;
}

async function walk(realRoot: string, relative: string, visit: (file: ListedFile) => void): Promise<void> {
  const entries = await readdir(path.join(realRoot, relative), { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (entry.name === '.git') continue;
    const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
    // Symlinked directories are listed as entries, never followed (they may point outside).
    if (entry.isDirectory()) await walk(realRoot, child, visit);
    else visit({ path: child, raw: Buffer.from(child), repository: undefined });
  }
}
