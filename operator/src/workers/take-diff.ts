// The run's change, taken from the sandbox for the finalize job: everything against HEAD,
// new files included (intent-to-add), cut at LIMITS.fullDiff, with its shortstat.
import { LIMITS } from '../api/index.ts';
import type { CallOptions, Sandbox } from '../sandbox/sandbox.ts';
import { parseShortstat, type DiffStats } from './diff-stats.ts';

interface BashResult {
  exitCode: number | null;
  stdout: string;
  stdoutTruncated: boolean;
  stdoutBytes: number;
  stdoutLog: string;
}

async function bash(sandbox: Sandbox, command: string, options: CallOptions): Promise<BashResult> {
  const response = await sandbox.call({ tool: 'bash', input: { command, timeoutMs: 120_000 }, clean: true }, options);
  if (!response.ok) throw new Error(`taking the diff failed: ${response.error.code}: ${response.error.message}`);
  return response.result as BashResult;
}

/** The change against HEAD, new files included (intent-to-add), cut at 1 MiB. */
export async function takeDiff(
  sandbox: Sandbox,
  options: CallOptions = {},
): Promise<{ diff: string; truncated: boolean; stats: DiffStats }> {
  const stats = await bash(
    sandbox,
    'git add -A --intent-to-add . >/dev/null 2>&1; git diff --no-color --no-ext-diff HEAD | wc -c; git diff --no-color --no-ext-diff --shortstat HEAD',
    options,
  );
  const [bytesLine = '0', statLine = ''] = stats.stdout.trim().split('\n');
  const totalBytes = Number(bytesLine.trim()) || 0;
  const out = await bash(sandbox, `git diff --no-color --no-ext-diff HEAD | head -c ${LIMITS.fullDiff}`, options);
  let diff = out.stdout;
  if (out.stdoutTruncated) {
    // The result shows only head and tail of a long stream; the whole is in the log file.
    const read = await sandbox.call({ tool: 'read_file', input: { path: out.stdoutLog, encoding: 'base64' } }, options);
    if (!read.ok) throw new Error(`reading the diff failed: ${read.error.code}: ${read.error.message}`);
    diff = Buffer.from((read.result as { content: string }).content, 'base64').toString('utf8');
  }
  return { diff, truncated: totalBytes > LIMITS.fullDiff, stats: parseShortstat(statLine) };
}
