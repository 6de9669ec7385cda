// git_diff: `git status --short` and the unified diff of the working tree (or the index with
// staged), each bounded. Paths are literal pathspecs (GIT_LITERAL_PATHSPECS).
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { GitDiffResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { GIT_DIFF_MAX_CHARS } from './contract/limits.ts';
import { captureOutput, gitEnvironment } from './child-process.ts';
import { findHelper } from './helper-programs.ts';
import { guardWorkspacePath } from './path-guard.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

export async function gitDiff(context: ToolboxContext, input: ToolInput<'git_diff'>): Promise<GitDiffResult> {
  // Found outside the workspace, never through the run's PATH (helper-programs.ts).
  const git = findHelper(context, 'git');
  if (!git) throw new ToolboxError('IO_ERROR', 'git is not installed in this sandbox');
  if (!existsSync(path.join(context.realRoot, '.git'))) {
    throw new ToolboxError('INVALID_INPUT', 'The workspace is not a git repository; use list_files and read_file instead');
  }
  const target = await guardWorkspacePath(context, input.path ?? '', { allowDenied: true });
  const pathspec = ['--', target.relative || '.'];
  const options = { cwd: context.realRoot, env: gitEnvironment(context), maxChars: GIT_DIFF_MAX_CHARS };
  const [status, diff] = await Promise.all([
    captureOutput(git, ['-c', 'core.quotepath=off', 'status', '--short', '--untracked-files=all', ...pathspec], options),
    captureOutput(
      git,
      ['-c', 'core.quotepath=off', 'diff', '--no-color', '--no-ext-diff', ...(input.staged ? ['--cached'] : []), ...pathspec],
      options,
    ),
  ]);
  for (const outcome of [status, diff]) {
    if (!outcome.truncated && outcome.exitCode !== 0) {
      throw new ToolboxError('IO_ERROR', `git failed: ${outcome.stderr.split('\n', 1)[0]?.slice(0, 300) ?? ''}`);
    }
  }
  return { status: status.stdout, diff: diff.stdout, truncated: status.truncated || diff.truncated };
}
