// list_files and glob: the files of the workspace, git-aware (tracked and untracked, not
// ignored unless asked) with one `git ls-files` in a repository, a directory walk otherwise;
// sorted and bounded.
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
  await forEachFile(context, base, Boolean(input.includeIgnored), (file) => selection.add(file));
  return finish(context, selection);
}

export async function glob(context: ToolboxContext, input: ToolInput<'glob'>): Promise<FileListResult> {
  const base = await guardDirectory(context, input.path);
  const pattern = compileGlob(input.pattern.replace(/^\.\//, ''));
  const prefix = base === '' ? '' : `${base}/`;
  const selection = new SortedSelection(Math.min(input.limit ?? LIST_DEFAULT_RESULTS, LIST_MAX_RESULTS));
  await forEachFile(context, base, Boolean(input.includeIgnored), (file) => {
    if (pattern.test(file.slice(prefix.length))) selection.add(file);
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

async function forEachFile(context: ToolboxContext, base: string, includeIgnored: boolean, visit: (file: string) => void): Promise<void> {
  if (findExecutable('git') && existsSync(path.join(context.realRoot, '.git'))) {
    const args = ['ls-files', '-z', '--cached', '--others', ...(includeIgnored ? [] : ['--exclude-standard']), '--', base || '.'];
    const outcome = await streamRecords('git', args, {
      cwd: context.realRoot,
      env: gitEnvironment(),
      separator: 0,
      maxRecordBytes: 4_096,
      onRecord: (record) => {
        if (record.length > 0) visit(record.toString('utf8'));
        return true;
      },
    });
    if (outcome.exitCode === 0) return;
    // Not a usable repository after all (e.g. a broken .git): fall back to walking.
  }
  await walk(context.realRoot, base, visit);
}

async function walk(realRoot: string, relative: string, visit: (file: string) => void): Promise<void> {
  const entries = await readdir(path.join(realRoot, relative), { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (entry.name === '.git') continue;
    const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
    // Symlinked directories are listed as entries, never followed (they may point outside).
    if (entry.isDirectory()) await walk(realRoot, child, visit);
    else visit(child);
  }
}
