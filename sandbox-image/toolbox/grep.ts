// grep: content search with the best engine the image has: ripgrep, else `git grep -E` in a
// repository, else `grep -rE`. All three search tracked, untracked and hidden files, skip .git
// and binary files (and credential files, which read_file denies too), and report 1-based lines that agree with read_file. Only rg and git grep
// know .gitignore; plain grep (no git at all) cannot tell ignored files apart.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { GrepEngine, GrepMatch, GrepResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { LINE_MAX_CHARS, SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS } from './contract/limits.ts';
import { findExecutable, gitEnvironment, streamRecords } from './child-process.ts';
import { leadingWithinAnswerBytes } from './answer-entries.ts';
import { guardWorkspacePath, isDeniedPath } from './path-guard.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

const MAX_RECORD_BYTES = 4_096 + LINE_MAX_CHARS * 4;

export async function grep(context: ToolboxContext, input: ToolInput<'grep'>): Promise<GrepResult> {
  const target = await guardWorkspacePath(context, input.path ?? '');
  const limit = Math.min(input.limit ?? SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS);
  const engine = chooseEngine(context);
  const scope = target.relative || '.';
  const { command, args, parse, env } = engineInvocation(engine, input, scope);

  const matches: GrepMatch[] = [];
  let truncated = false;
  const outcome = await streamRecords(command, args, {
    cwd: context.realRoot,
    env,
    separator: 0x0a,
    maxRecordBytes: MAX_RECORD_BYTES,
    onRecord: (record) => {
      const match = parse(record);
      // Credential files are closed to the file tools; grep must not become a way to read them.
      if (!match || isDeniedPath(match.path)) return true;
      if (matches.length >= limit) {
        truncated = true;
        return false;
      }
      matches.push(match);
      return true;
    },
  });
  // Exit 1 means "no match" for all three engines; 2 is an error such as a bad regex, but also
  // an unreadable file somewhere in the tree, which must not hide the matches that were found.
  if (!outcome.stopped && outcome.exitCode !== 0 && outcome.exitCode !== 1 && matches.length === 0) {
    throw new ToolboxError(
      'INVALID_INPUT',
      `grep failed: ${firstLine(outcome.stderr) || `exit ${outcome.exitCode}`}; check the pattern (extended regular expression)`,
    );
  }
  // rg searches in parallel: sort so results do not depend on thread timing.
  matches.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line));
  // Cut after sorting, so what is kept does not depend on thread timing either.
  const kept = leadingWithinAnswerBytes(matches);
  return { matches: matches.slice(0, kept), truncated: truncated || kept < matches.length, engine };
}

export function chooseEngine(context: ToolboxContext): GrepEngine {
  if (findExecutable('rg')) return 'rg';
  if (findExecutable('git') && existsSync(path.join(context.realRoot, '.git'))) return 'git-grep';
  return 'grep';
}

interface Invocation {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  parse: (record: Buffer) => GrepMatch | undefined;
}

function engineInvocation(engine: GrepEngine, input: ToolInput<'grep'>, scope: string): Invocation {
  const caseFlag = input.ignoreCase ? ['-i'] : [];
  switch (engine) {
    case 'rg':
      return {
        command: 'rg',
        args: [
          '--no-config',
          '--no-messages',
          '--no-heading',
          '--with-filename',
          '--line-number',
          '--null',
          '--color=never',
          '--hidden',
          '--glob=!.git',
          ...(input.includeIgnored ? ['--no-ignore'] : []),
          ...caseFlag,
          '--regexp',
          input.pattern,
          '--',
          scope,
        ],
        env: process.env,
        parse: parseNulPathThenColon,
      };
    case 'git-grep':
      return {
        command: 'git',
        args: [
          'grep',
          '--no-color',
          '-n',
          '-z',
          '-I',
          '-E',
          '--untracked',
          ...(input.includeIgnored ? ['--no-exclude-standard'] : []),
          ...caseFlag,
          '-e',
          input.pattern,
          '--',
          scope,
        ],
        env: gitEnvironment(),
        parse: parseGitGrep,
      };
    case 'grep':
      return {
        command: 'grep',
        args: ['-r', '-s', '-n', '-I', '-E', '-Z', '--exclude-dir=.git', ...caseFlag, '-e', input.pattern, '--', scope],
        env: process.env,
        parse: parseNulPathThenColon,
      };
  }
}

/** rg --null and grep -Z: `path\0line:text`. */
function parseNulPathThenColon(record: Buffer): GrepMatch | undefined {
  const nul = record.indexOf(0);
  if (nul === -1) return undefined;
  const colon = record.indexOf(0x3a, nul + 1);
  if (colon === -1) return undefined;
  return makeMatch(record.subarray(0, nul), record.subarray(nul + 1, colon), record.subarray(colon + 1));
}

/** git grep -z: `path\0line\0text`. */
function parseGitGrep(record: Buffer): GrepMatch | undefined {
  const first = record.indexOf(0);
  if (first === -1) return undefined;
  const second = record.indexOf(0, first + 1);
  if (second === -1) return undefined;
  return makeMatch(record.subarray(0, first), record.subarray(first + 1, second), record.subarray(second + 1));
}

function makeMatch(rawPath: Buffer, rawLine: Buffer, rawText: Buffer): GrepMatch | undefined {
  const line = Number(rawLine.toString('latin1'));
  if (!Number.isSafeInteger(line)) return undefined;
  let text = rawText.toString('utf8');
  if (line === 1 && text.startsWith('\uFEFF')) text = text.slice(1);
  if (text.endsWith('\r')) text = text.slice(0, -1);
  if (text.length > LINE_MAX_CHARS) text = text.slice(0, LINE_MAX_CHARS);
  return { path: rawPath.toString('utf8').replace(/^\.\//, ''), line, text };
}

/** rg spreads a regex error over several lines; keep it short but whole. */
function firstLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 300);
}
