// What each tool does, in the words the model reads. Kept beside the schemas so the operator
// defines its tools from one place.
import type { ToolName } from './tool-schemas.ts';

export const TOOL_DESCRIPTIONS: Record<ToolName, string> = {
  read_file:
    'Read a text file as numbered-line windows of at most 2000 lines and 65 536 characters (continue at endLine + 1 when truncated), an image (png, jpeg, gif, webp), or raw bytes with encoding "base64". Text results carry the repository instructions that apply to the file.',
  write_file: 'Create or replace a whole file atomically; missing directories are created.',
  edit_file:
    'Replace an exact, unique piece of text in a file (or every occurrence with replaceAll). Match against the text as read_file shows it; the file keeps its byte order mark and line endings.',
  multi_edit: 'Apply several exact-text edits to one file in order; nothing is written if any of them fails.',
  grep: 'Search file contents with an extended regular expression; returns path, 1-based line and text of each match, sorted by path then line (past limit, the first ones in that order).',
  glob: 'Find files whose path matches a glob such as "**/*.ts"; sorted. A backslash makes the next character literal (app/\\[id\\]/page.tsx), and a pattern also finds the path it spells exactly.',
  list_files: 'List the files under a directory (tracked and untracked, not git-ignored ones unless asked); sorted.',
  bash: 'Run a shell command in the workspace. The working directory and exported variables persist between calls. Long output is cut to its first 8 KiB and last 24 KiB; the full output is in stdoutLog/stderrLog, readable with read_file.',
  bash_output: "Read a background job's output from a byte offset (at most 32 KiB) and its status.",
  bash_kill: 'Stop a background job and every process it started.',
  git_diff: 'Show git status --short and the unified diff of the working tree (or of the index with staged).',
  read_repository_instructions:
    'Return the repository guidance (AGENTS.md, CLAUDE.md) that applies to paths, which may not exist yet; use it before working in a new directory.',
};
