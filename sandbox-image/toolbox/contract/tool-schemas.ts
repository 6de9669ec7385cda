// Input schemas of the twelve tools, written for the model: every field's description is what
// the model reads when it decides how to call the tool. The operator builds its ai SDK tools
// from these; the toolbox validates every request with the same objects.
import { z } from 'zod';
import { BASH_MAX_TIMEOUT_MS, INSTRUCTIONS_MAX_PATHS, LIST_MAX_RESULTS, READ_MAX_LINES, SEARCH_MAX_RESULTS } from './limits.ts';

/** Longest path accepted; error messages echo paths, so they must stay short. */
export const PATH_MAX_CHARS = 4_096;

const workspacePath = (what: string) =>
  z.string().min(1).max(PATH_MAX_CHARS).describe(`${what}, relative to the workspace root or starting with /workspace/`);

// describe() after optional(): zod 4 keeps a description on the schema it was given, and the
// model is shown the outer (optional) one.
const optionalWorkspacePath = (what: string) =>
  z.string().min(1).max(PATH_MAX_CHARS).optional().describe(`${what}, relative to the workspace root or starting with /workspace/`);

const includeIgnored = z.boolean().optional().describe('Also include files that .gitignore excludes (default false)');

export const readFileInput = z.object({
  path: z
    .string()
    .min(1)
    .max(PATH_MAX_CHARS)
    .describe(
      'File to read, relative to the workspace root or starting with /workspace/; also the absolute stdoutLog/stderrLog/outputLog path of a bash result',
    ),
  offset: z.number().int().min(1).optional().describe('1-based line to start at (default 1); to continue a truncated read use endLine + 1'),
  limit: z
    .number()
    .int()
    .min(1)
    .max(READ_MAX_LINES)
    .optional()
    .describe(`Number of lines to return (default and maximum ${READ_MAX_LINES})`),
  encoding: z
    .enum(['utf8', 'base64'])
    .optional()
    .describe('"base64" returns the raw bytes of a file up to 1 MiB; default "utf8" returns text lines'),
});

export const writeFileInput = z.object({
  path: workspacePath('File to create or replace'),
  content: z.string().describe('The complete new content of the file'),
  encoding: z.enum(['utf8', 'base64']).optional().describe('"base64" when content is base64-encoded bytes; default "utf8"'),
});

const editFields = {
  oldString: z
    .string()
    .min(1)
    .describe('Exact text to replace, as read_file shows it (LF line endings, no byte order mark); must be unique unless replaceAll'),
  newString: z.string().describe('Text to put in its place; must differ from oldString'),
  replaceAll: z.boolean().optional().describe('Replace every occurrence instead of requiring exactly one (default false)'),
};

export const editFileInput = z.object({
  path: workspacePath('File to edit'),
  ...editFields,
});

export const multiEditInput = z.object({
  path: workspacePath('File to edit'),
  edits: z
    .array(z.object(editFields))
    .min(1)
    .max(100)
    .describe('Edits applied in order, each to the result of the previous one; if any fails nothing is written'),
});

export const grepInput = z.object({
  pattern: z.string().min(1).max(10_000).describe('Extended regular expression to search file contents for'),
  path: optionalWorkspacePath('Directory or file to search in (default the whole workspace)'),
  ignoreCase: z.boolean().optional().describe('Match case-insensitively (default false)'),
  includeIgnored,
  limit: z
    .number()
    .int()
    .min(1)
    .max(SEARCH_MAX_RESULTS)
    .optional()
    .describe(`Maximum matches to return (default 100, at most ${SEARCH_MAX_RESULTS})`),
});

/** glob and list_files return the same kind of bounded file list. */
const fileListLimit = z
  .number()
  .int()
  .min(1)
  .max(LIST_MAX_RESULTS)
  .optional()
  .describe(`Maximum files to return (default 1000, at most ${LIST_MAX_RESULTS})`);

export const globInput = z.object({
  pattern: z
    .string()
    .min(1)
    .max(10_000)
    .describe('Glob matched against paths relative to path, e.g. "**/*.ts" or "src/*.json"; ** spans directories, * stays within one'),
  path: optionalWorkspacePath('Directory to search under (default the workspace root)'),
  includeIgnored,
  limit: fileListLimit,
});

export const listFilesInput = z.object({
  path: optionalWorkspacePath('Directory to list (default the workspace root)'),
  includeIgnored,
  limit: fileListLimit,
});

export const bashInput = z.object({
  command: z
    .string()
    .min(1)
    .max(100_000)
    .describe('Shell command for bash; the working directory and exported variables persist to the next call'),
  cwd: optionalWorkspacePath('Directory to run in (default the directory the previous command ended in)'),
  timeoutMs: z
    .number()
    .int()
    .min(1)
    .max(BASH_MAX_TIMEOUT_MS)
    .optional()
    .describe('Kill the command and everything it started after this many milliseconds (default 5 minutes, at most 30)'),
  background: z
    .boolean()
    .optional()
    .describe('Start the command as a background job and return its id at once; follow it with bash_output, stop it with bash_kill'),
});

const jobId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/)
  .describe('Job id returned by bash with background: true');

export const bashOutputInput = z.object({
  job: jobId,
  offset: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Byte offset to read the job output from (default 0); use nextOffset of the previous call to follow'),
});

export const bashKillInput = z.object({ job: jobId });

export const gitDiffInput = z.object({
  staged: z.boolean().optional().describe('Show the staged changes (index against HEAD) instead of the working tree'),
  path: optionalWorkspacePath('Limit status and diff to this file or directory'),
});

export const readRepositoryInstructionsInput = z.object({
  paths: z
    .array(workspacePath('File or directory, which need not exist yet'))
    .min(1)
    .max(INSTRUCTIONS_MAX_PATHS)
    .describe('Paths whose repository guidance (AGENTS.md, CLAUDE.md of each directory from the root down) to return'),
});

export const toolInputSchemas = {
  read_file: readFileInput,
  write_file: writeFileInput,
  edit_file: editFileInput,
  multi_edit: multiEditInput,
  grep: grepInput,
  glob: globInput,
  list_files: listFilesInput,
  bash: bashInput,
  bash_output: bashOutputInput,
  bash_kill: bashKillInput,
  git_diff: gitDiffInput,
  read_repository_instructions: readRepositoryInstructionsInput,
} as const;

export type ToolName = keyof typeof toolInputSchemas;
export const TOOL_NAMES = Object.keys(toolInputSchemas) as ToolName[];
export type ToolInput<T extends ToolName> = z.infer<(typeof toolInputSchemas)[T]>;

export function isToolName(value: unknown): value is ToolName {
  return typeof value === 'string' && Object.hasOwn(toolInputSchemas, value);
}

/**
 * What one call of each tool may do. `changes`: it may change the workspace or the jobs running
 * in the sandbox (bash runs anything; bash_kill ends a job that may have written), so it must
 * never run twice: the toolbox journals it by call id (call-journal.ts), the worker saves its
 * result the moment it finishes and snapshots the diff after its step. `reads`: run again, it
 * answers again and changes nothing the model asked for. bash_output reads a job's output from
 * the offset given, but may stop a job whose log passed the cap, as the job's watchdog would
 * (between its polls, or with it killed): still a read, since the cap stops the job whatever
 * calls come, and run again it answers the same (the `capped` marker stays, bash-jobs.ts).
 * A Record over every name, so a new tool does not compile until someone decides which it is.
 */
export const TOOL_EFFECTS: Readonly<Record<ToolName, 'reads' | 'changes'>> = {
  read_file: 'reads',
  write_file: 'changes',
  edit_file: 'changes',
  multi_edit: 'changes',
  grep: 'reads',
  glob: 'reads',
  list_files: 'reads',
  bash: 'changes',
  bash_output: 'reads',
  bash_kill: 'changes',
  git_diff: 'reads',
  read_repository_instructions: 'reads',
};

/** Whether a call of `tool` may change something (false for a name the contract does not know). */
export const changesSandbox = (tool: string): boolean => isToolName(tool) && TOOL_EFFECTS[tool] === 'changes';
