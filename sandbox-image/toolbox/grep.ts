// grep: content search with the best engine the image has: ripgrep, else `git grep -E` in a
// repository, else `grep -rE`. All three search tracked, untracked and hidden files, skip .git
// and binary files (and credential files, which read_file denies too), and report 1-based lines
// that agree with read_file. Only rg and git grep know .gitignore; plain grep (no git at all)
// cannot tell ignored files apart.
//
// Matches are sorted by path, then line, and a cut at `limit` keeps the first ones in that order
// on every call. rg searches files in parallel and reports them as threads finish, so stopping at
// `limit` kept whichever files came first. A search runs in two passes instead: every file that
// matches (rg still in parallel, one match per file is enough), keeping the first `limit` paths,
// then the lines of only those files; the first `limit` matches lie in at most `limit` files.
// rg --sort path would be ordered but single-threaded, and its order (directory by directory,
// `a/x` before `a.txt`) is not the path order list_files and glob sort by.
//
// The second pass gets the paths exactly as the first printed them, bytes and all: a name that
// is not UTF-8 (`caf\xe9.txt`) cannot be an argument from node, which encodes every argument
// as UTF-8, so the paths go NUL-separated to `xargs -0` on stdin (findutils, in every Debian
// image). Without xargs they are arguments, and such a file is searched under a name it does
// not have.
import { lstat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { GrepEngine, GrepMatch, GrepResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { LINE_MAX_CHARS, SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS } from './contract/limits.ts';
import { findExecutable, gitEnvironment, streamRecords } from './child-process.ts';
import { leadingWithinAnswerBytes } from './answer-entries.ts';
import { anchorsAsReadFileShows } from './line-anchors.ts';
import { guardWorkspacePath, isDeniedPath } from './path-guard.ts';
import { compareCodeUnits, SortedSelection } from './sorted-selection.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

const MAX_RECORD_BYTES = 4_096 + LINE_MAX_CHARS * 4;
const MAX_PATH_BYTES = 4_096;
/** Argument bytes of one second-pass run, far below the kernel's limit on one exec (ARG_MAX). */
const MAX_ARGUMENT_BYTES = 128 * 1_024;

export async function grep(context: ToolboxContext, input: ToolInput<'grep'>): Promise<GrepResult> {
  const target = await guardWorkspacePath(context, input.path ?? '');
  // Checked here because the engines cannot say it: rg --no-messages hides "No such file" and
  // exits 2 like a bad regex, and git grep answers a pathspec that names nothing with no match.
  if (!(await lstat(target.real).catch(() => undefined))) {
    throw new ToolboxError('NOT_FOUND', `${input.path} does not exist; find the right path with list_files or glob, or leave out path`);
  }
  const limit = Math.min(input.limit ?? SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS);
  const engine = chooseEngine(context);

  const files = new SortedSelection<MatchingFile>(limit, compareFiles);
  const listing = engineInvocation(engine, input, { kind: 'files', scope: target.relative || '.' });
  const outcome = await streamRecords(listing.command, listing.args, {
    cwd: context.realRoot,
    env: listing.env,
    separator: 0,
    maxRecordBytes: MAX_PATH_BYTES,
    onRecord: (record) => {
      const file = displayPath(record);
      // Credential files are closed to the file tools; grep must not become a way to read them.
      if (file !== '' && !isDeniedPath(file)) files.add({ path: file, raw: record });
      return true;
    },
  });
  const selected = files.result();
  // Exit 1 means "no match" for all three engines; 2 is an error such as a bad regex, but also
  // an unreadable file somewhere in the tree, which must not hide the matches that were found.
  if (outcome.exitCode !== 0 && outcome.exitCode !== 1 && selected.items.length === 0) {
    throw new ToolboxError(
      'INVALID_INPUT',
      `grep failed: ${firstLine(outcome.stderr) || `exit ${outcome.exitCode}`}; check the pattern (extended regular expression)`,
    );
  }

  const matches = new SortedSelection<GrepMatch>(limit, compareMatches);
  for (const run of secondPassRuns(engine, input, selected.items, limit)) {
    // Exit codes are not read: a file deleted since the first pass is only one without matches.
    await streamRecords(run.command, run.args, {
      cwd: context.realRoot,
      env: run.env,
      input: run.input,
      // xargs is killed with the engine it started, not alone, when the search takes too long.
      processGroup: true,
      separator: 0x0a,
      maxRecordBytes: MAX_RECORD_BYTES,
      onRecord: (record) => {
        const match = run.parse(record);
        if (match) matches.add(match);
        return true;
      },
    });
  }
  const found = matches.result();
  const kept = leadingWithinAnswerBytes(found.items);
  return { matches: found.items.slice(0, kept), truncated: selected.truncated || found.truncated || kept < found.items.length, engine };
}

export function chooseEngine(context: ToolboxContext): GrepEngine {
  if (findExecutable('rg')) return 'rg';
  if (findExecutable('git') && existsSync(path.join(context.realRoot, '.git'))) return 'git-grep';
  return 'grep';
}

/** A file the first pass found: its path as the results show it, and as the engine printed it. */
interface MatchingFile {
  path: string;
  raw: Buffer;
}

/** The first pass lists the files under `scope` that match; the second searches `files` line by line. */
type Pass = { kind: 'files'; scope: string } | { kind: 'lines'; files: string[]; limit: number };

/** The second pass over `files`: one xargs run fed their raw paths, or runs with them as arguments. */
function secondPassRuns(
  engine: GrepEngine,
  input: ToolInput<'grep'>,
  files: readonly MatchingFile[],
  limit: number,
): Array<Invocation & { input?: Buffer }> {
  if (files.length === 0) return [];
  if (findExecutable('xargs')) {
    const search = engineInvocation(engine, input, { kind: 'lines', files: [], limit });
    const paths = Buffer.concat(files.flatMap((file) => [file.raw, Buffer.of(0)]));
    return [{ ...search, command: 'xargs', args: ['-0', '-r', search.command, ...search.args], input: paths }];
  }
  return argumentBatches(files.map((file) => file.raw.toString('utf8'))).map((batch) =>
    engineInvocation(engine, input, { kind: 'lines', files: batch, limit }),
  );
}

interface Invocation {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  parse: (record: Buffer) => GrepMatch | undefined;
}

function engineInvocation(engine: GrepEngine, input: ToolInput<'grep'>, pass: Pass): Invocation {
  const caseFlag = input.ignoreCase ? ['-i'] : [];
  const operands = pass.kind === 'files' ? [pass.scope] : pass.files;
  // One more than the limit per file: enough to know that a single file has more.
  const perFile = pass.kind === 'lines' ? [`--max-count=${pass.limit + 1}`] : [];
  switch (engine) {
    case 'rg':
      return {
        command: 'rg',
        args: [
          '--no-config',
          '--no-messages',
          '--color=never',
          '--null',
          '--hidden',
          '--glob=!.git',
          // `$` matches before `\r\n`, as read_file shows such a line ending (rg strips a BOM itself).
          '--crlf',
          ...(input.includeIgnored ? ['--no-ignore'] : []),
          ...caseFlag,
          ...(pass.kind === 'files' ? ['--files-with-matches'] : ['--no-heading', '--with-filename', '--line-number', ...perFile]),
          '--regexp',
          input.pattern,
          '--',
          ...operands,
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
          '-z',
          '-I',
          '-E',
          '--untracked',
          ...(input.includeIgnored ? ['--no-exclude-standard'] : []),
          ...caseFlag,
          // No --max-count: git grep has it only since 2.38; the selection bounds memory anyway.
          ...(pass.kind === 'files' ? ['-l'] : ['-n']),
          '-e',
          anchorsAsReadFileShows(input.pattern),
          '--',
          ...operands,
        ],
        env: gitEnvironment(),
        parse: parseGitGrep,
      };
    case 'grep':
      return {
        command: 'grep',
        args: [
          '-s',
          '-I',
          '-E',
          '-Z',
          ...(pass.kind === 'files' ? ['-r', '-l', '--exclude-dir=.git'] : ['-n', '-H', ...perFile]),
          ...caseFlag,
          '-e',
          anchorsAsReadFileShows(input.pattern),
          '--',
          ...operands,
        ],
        env: process.env,
        parse: parseNulPathThenColon,
      };
  }
}

/** By path, then by the bytes the path came from: two names that are not UTF-8 may show alike. */
function compareFiles(a: MatchingFile, b: MatchingFile): number {
  return compareCodeUnits(a.path, b.path) || Buffer.compare(a.raw, b.raw);
}

/** The first `limit` matches by path, then line: the order results are sorted and cut in. */
function compareMatches(a: GrepMatch, b: GrepMatch): number {
  return compareCodeUnits(a.path, b.path) || a.line - b.line;
}

/** Paths in runs whose argument bytes stay within MAX_ARGUMENT_BYTES. */
function argumentBatches(paths: readonly string[]): string[][] {
  const batches: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const file of paths) {
    const size = Buffer.byteLength(file) + 1;
    if (current.length > 0 && bytes + size > MAX_ARGUMENT_BYTES) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(file);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
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
  return { path: displayPath(rawPath), line, text };
}

/** A path as the engines print it (`./src/a.ts` under `.`), as the results show it. */
function displayPath(raw: Buffer): string {
  return raw.toString('utf8').replace(/^\.\//, '');
}

/** rg spreads a regex error over several lines; keep it short but whole. */
function firstLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 300);
}
