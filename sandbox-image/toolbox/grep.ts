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
//
// A repository nested in the workspace's (an untracked clone, a submodule) is searched with its
// own ignore rules, as list_files lists it. rg does that itself: it reads each repository's
// .gitignore and stops applying the outer one at its .git. git grep does not enter one at all,
// so with git grep the first pass also searches, by name, the files the listing lists there
// (file-listing.ts: each repository's own `git ls-files`, at most 64 asked, the rest walked), in
// parallel with git grep over the outer repository. Past those 64, rg still reads the rules
// that the listing and git grep no longer do: ignored files of those repositories are searched
// with git grep only. That nested part has one deadline of its own, well under the outer pass's:
// past it, or when it fails, the answer keeps what the outer pass found, says truncated, and
// says in `diagnostics` that nested repositories were not fully searched, or, when the listing
// (which reads the outer repository too, only to find them) stopped before it found one, that
// it could not tell whether there are any: matches may be missing either way. The pattern is
// checked before the listing starts, so a bad one answers at once, and whatever still runs when
// the call ends is stopped.
//
// The second pass's output is split at newlines, which a file name may hold: a record of
// `evil\n./src/auth.ts` would split into a piece that spells a line of `./src/auth.ts` (its own
// text after the name's newline), and its real matches would be lost. Files whose names hold a
// newline are searched in runs of their own, one file each, whose output is read as that file's
// records only, joined back across the name's newlines; the others share runs as before. Each
// such name costs one engine process more, at most `limit` of them.
//
// The second pass opens files by name, and rg and grep open a name given to them whatever it is:
// a FIFO (or a device) swapped in for a file after the first pass would hold a run until something
// wrote to it. The first pass never opens one, as the walkers take regular files only; the second
// does the same, dropping every name that is no longer a regular file (lstat, as a file deleted
// since is only one without matches; grep also skips devices itself, `-D skip`). A swap between
// that look and the engine's open still holds a run, so the whole call shares one deadline
// (HELPER_TIMEOUT_MS from its start, what one engine run had before): the second pass's runs get
// what the first left of it, and once it is spent the rest are skipped, the matches found so far
// answered with truncated and a diagnostic naming how many files were not read.
//
// A run over named files yields only those files: a name that became a directory since it was
// listed (`git grep --no-index` and rg take a directory operand as everything under it, ignored
// files and deeper repositories included) is searched to no depth, and any other path it prints
// is dropped, so a directory swapped in between listing and search brings in nothing.
import { lstat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { GrepEngine, GrepMatch, GrepResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { LINE_MAX_CHARS, SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS } from './contract/limits.ts';
import { gitEnvironment, HELPER_TIMEOUT_MS, streamRecords, type ProcessOutcome } from './child-process.ts';
import { findHelper, type HelperName } from './helper-programs.ts';
import { leadingWithinAnswerBytes } from './answer-entries.ts';
import { forEachFile } from './file-listing.ts';
import { anchorsAsReadFileShows } from './line-anchors.ts';
import { guardWorkspacePath, isDeniedPath } from './path-guard.ts';
import { compareCodeUnits, SortedSelection } from './sorted-selection.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

const MAX_RECORD_BYTES = 4_096 + LINE_MAX_CHARS * 4;
/** The second pass's record separator, which a file name may hold too (see the header). */
const NEWLINE = 0x0a;
const MAX_PATH_BYTES = 4_096;
/** Argument bytes of one run over named files, far below the kernel's limit on one exec (ARG_MAX). */
const MAX_ARGUMENT_BYTES = 128 * 1_024;
/**
 * Files named to one run. `git grep --no-index` matches each path it walks against every name
 * given, so a run over thousands costs their square: 20 000 files took 2 s in xargs' default
 * runs (128 KiB of names), 0.6 s in runs of 500 (0.9 s of 1 000, 0.7 s of 250).
 */
const MAX_FILES_PER_RUN = 500;
/**
 * How long the nested part of a git grep search (listing nested repositories, searching their
 * files) may take in all: well under the outer pass's HELPER_TIMEOUT_MS, so a slow clone costs
 * the answer its own matches, never the answer.
 */
export const NESTED_SEARCH_DEADLINE_MS = 30_000;
/** How long one grep call may search in all: the bound one engine run had on its own before. */
export const SEARCH_DEADLINE_MS = HELPER_TIMEOUT_MS;

/** What bounds one grep call; tests shorten it. */
export interface SearchBounds {
  /** The whole call, from its start: the pattern check, both passes and every run in them. */
  timeoutMs: number;
}

/** A path component longer than any file system allows (NAME_MAX is 255): it names nothing, ever. */
const NAMES_NOTHING = `${'x'.repeat(256)}/x`;

export async function grep(
  context: ToolboxContext,
  input: ToolInput<'grep'>,
  bounds: SearchBounds = { timeoutMs: SEARCH_DEADLINE_MS },
): Promise<GrepResult> {
  const deadline = Date.now() + bounds.timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  const target = await guardWorkspacePath(context, input.path ?? '');
  // Checked here because the engines cannot say it: rg --no-messages hides "No such file" and
  // exits 2 like a bad regex, and git grep answers a pathspec that names nothing with no match.
  const scope = await lstat(target.real).catch(() => undefined);
  if (!scope) {
    throw new ToolboxError('NOT_FOUND', `${input.path} does not exist; find the right path with list_files or glob, or leave out path`);
  }
  // rg and grep open a path given to them whatever it is: a FIFO would hold the call (see the header).
  if (!scope.isFile() && !scope.isDirectory()) {
    throw new ToolboxError(
      'IO_ERROR',
      `${input.path} is not a regular file or a directory (a FIFO, socket or device); grep searches only files`,
    );
  }
  const limit = Math.min(input.limit ?? SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS);
  const engine = chooseEngine(context);
  // The nested part may list for seconds before any search says the pattern is bad.
  if (engine === 'git-grep') await withinCallDeadline(bounds, checkGitGrepPattern(context, input, left()));

  const files = new SortedSelection<MatchingFile>(limit, compareFiles);
  const addFile = (record: Buffer) => {
    const file = displayPath(record);
    // Credential files are closed to the file tools; grep must not become a way to read them.
    if (file !== '' && !isDeniedPath(file)) files.add({ path: file, raw: record });
    return true;
  };
  const walk = engineInvocation(context, engine, input, { output: 'files', operands: { scope: target.relative || '.' }, limit });
  // Stops whatever part of the first pass still runs once the call ends, with an answer or an error.
  const stop = new AbortController();
  let outcome: ProcessOutcome;
  let nestedShortfall: string | undefined;
  try {
    const nested =
      engine === 'git-grep' ? searchNestedRepositories(context, input, target.relative, limit, addFile, stop.signal, left()) : undefined;
    outcome = await withinCallDeadline(
      bounds,
      streamRecords(walk.command, walk.args, {
        cwd: context.realRoot,
        env: walk.env,
        separator: 0,
        maxRecordBytes: MAX_PATH_BYTES,
        timeoutMs: left(),
        signal: stop.signal,
        onRecord: addFile,
      }),
    );
    nestedShortfall = await nested;
  } finally {
    stop.abort();
  }
  const selected = files.result();
  // Exit 1 means "no match" for all three engines; 2 is an error such as a bad regex, but also
  // an unreadable file somewhere in the tree, which must not hide the matches that were found.
  if (outcome.exitCode !== 0 && outcome.exitCode !== 1 && selected.items.length === 0) throw searchFailed(outcome);

  const matches = new SortedSelection<GrepMatch>(limit, compareMatches);
  const lines = { output: 'lines', limit } as const;
  const searchable = await regularFiles(
    context,
    selected.items.map((file) => file.raw),
  );
  const runs = secondPassRuns(context, engine, input, lines, searchable);
  let unread = 0;
  for (const [index, run] of runs.entries()) {
    if (Date.now() >= deadline) {
      unread = namesIn(runs.slice(index));
      break;
    }
    const readLine = run.lineReader();
    // The names this run printed lines of, by their bytes: when it is stopped, only the others
    // are unread (one xargs run holds every name without a newline).
    const printed = new Set<string>();
    try {
      // Exit codes are not read: a file deleted since the first pass is only one without matches.
      await streamRecords(run.command, run.args, {
        cwd: context.realRoot,
        env: run.env,
        input: run.input,
        // xargs is killed with the engine it started, not alone, when the search takes too long.
        processGroup: true,
        separator: NEWLINE,
        maxRecordBytes: MAX_RECORD_BYTES,
        timeoutMs: left(),
        onRecord: (line) => {
          const match = readLine(line);
          if (match) {
            matches.add(match);
            // A run of one name reads records joined across its newlines: the line is only a piece.
            printed.add((run.names.length === 1 ? (run.names[0] as Buffer) : pathOfLine(line)).toString('latin1'));
          }
          return true;
        },
      });
    } catch (error) {
      if (!(ToolboxError.isInstance(error) && error.code === 'TIMEOUT')) throw error;
      // The lines this run printed before it was stopped are whole records, and kept. A run that
      // printed every name was stopped in one (grep prints as it reads): one file, at least, is
      // said to be unread, so a run the deadline cut always says so.
      const unprinted = run.names.filter((name) => !printed.has(name.toString('latin1'))).length;
      unread = Math.max(1, unprinted) + namesIn(runs.slice(index + 1));
      break;
    }
  }
  const found = matches.result();
  const kept = leadingWithinAnswerBytes(found.items);
  const diagnostics = [
    ...(nestedShortfall === undefined ? [] : [nestedShortfall]),
    ...(unread === 0 ? [] : [linesUnread(unread, bounds.timeoutMs)]),
  ];
  const truncated = selected.truncated || found.truncated || kept < found.items.length || diagnostics.length > 0;
  return {
    matches: found.items.slice(0, kept),
    truncated,
    engine,
    ...(diagnostics.length === 0 ? {} : { diagnostics }),
  };
}

/**
 * The first pass's files that are still regular files: a FIFO, socket or device swapped in since
 * (or a directory, a symlink) is dropped as a deleted file is, never opened (see the header).
 */
async function regularFiles(context: ToolboxContext, files: readonly Buffer[]): Promise<Buffer[]> {
  const root = Buffer.from(`${context.realRoot}/`);
  const kinds = await Promise.all(files.map((file) => lstat(Buffer.concat([root, file])).catch(() => undefined)));
  return files.filter((_, index) => kinds[index]?.isFile() === true);
}

/** How many files the runs name: those whose lines a spent deadline left unread. */
function namesIn(runs: ReadonlyArray<{ names: Buffer[] }>): number {
  return runs.reduce((count, run) => count + run.names.length, 0);
}

function linesUnread(files: number, timeoutMs: number): string {
  const which = files === 1 ? '1 file' : `${files} files`;
  return `grep reached its ${formatSeconds(timeoutMs)} limit before it read all matching lines of ${which} that matched, so matches in them may be missing; narrow the path or the pattern`;
}

/**
 * An engine run the call's deadline stopped says so for the call: the run's own message would
 * name only what was left of the deadline when it started.
 */
async function withinCallDeadline<T>(bounds: SearchBounds, run: Promise<T>): Promise<T> {
  try {
    return await run;
  } catch (error) {
    if (ToolboxError.isInstance(error) && error.code === 'TIMEOUT') {
      throw new ToolboxError('TIMEOUT', `grep took longer than ${formatSeconds(bounds.timeoutMs)}; narrow the path or the pattern`);
    }
    throw error;
  }
}

export function chooseEngine(context: ToolboxContext): GrepEngine {
  if (findHelper(context, 'rg')) return 'rg';
  if (findHelper(context, 'git') && existsSync(path.join(context.realRoot, '.git'))) return 'git-grep';
  return 'grep';
}

/** A file the first pass found: its path as the results show it, and as the engine printed it. */
interface MatchingFile {
  path: string;
  raw: Buffer;
}

/** What a run prints: the files that match (the first pass), or their matching lines (the second). */
interface Output {
  output: 'files' | 'lines';
  /** Lines wanted in all; one more a file is read, enough to know that a file has more. */
  limit: number;
}

/**
 * One run of an engine: over the tree under `scope`, which it walks with its own rules, or over
 * files given by name (on stdin through xargs when `named` is empty).
 */
type Pass = Output & { operands: { scope: string } | { named: string[] } };

/**
 * The first pass's part that git grep cannot see: the files the listing lists under `scope` in
 * repositories nested in the workspace's (or walked there), searched by name, all within one
 * deadline. Never throws: undefined when all of it was searched, else what the answer should
 * say was not (the matches found before that are kept). The listing covers the whole outer
 * repository too, only to find nested ones: when it stops before it found any, there may be none
 * at all, and the answer says it could not tell rather than that some were not searched.
 */
async function searchNestedRepositories(
  context: ToolboxContext,
  input: ToolInput<'grep'>,
  scope: string,
  limit: number,
  onRecord: (record: Buffer) => boolean,
  signal: AbortSignal,
  callLeftMs: number,
): Promise<string | undefined> {
  // Within the call's deadline too, which a test may set below it.
  const timeoutMs = Math.min(context.nestedSearchDeadlineMs ?? NESTED_SEARCH_DEADLINE_MS, callLeftMs);
  const deadline = Date.now() + timeoutMs;
  const tooLong = `listing and searching them took longer than ${formatSeconds(timeoutMs)}`;
  let found = false;
  try {
    const nested: Buffer[] = [];
    await forEachFile(
      context,
      scope,
      Boolean(input.includeIgnored),
      (file) => {
        // git grep in the root's repository searched what that repository lists.
        if (file.repository !== '') nested.push(file.raw);
      },
      {
        timeoutMs,
        signal,
        onNestedRepository: () => {
          found = true;
        },
      },
    );
    for (const run of namedFileRuns(context, 'git-grep', input, { output: 'files', limit }, nested)) {
      if (Date.now() >= deadline) return nestedShortfall(tooLong);
      // Exit codes are not read: the pattern was checked, and the outer pass answers for the rest.
      await streamRecords(run.command, run.args, {
        cwd: context.realRoot,
        env: run.env,
        input: run.input,
        processGroup: true,
        separator: 0,
        maxRecordBytes: MAX_PATH_BYTES,
        timeoutMs: Math.max(1, deadline - Date.now()),
        signal,
        onRecord: (record) => (run.isNamed(record) ? onRecord(record) : true),
      });
    }
    return undefined;
  } catch (error) {
    const timedOut = ToolboxError.isInstance(error) && error.code === 'TIMEOUT';
    const reason = timedOut ? undefined : firstLine(error instanceof Error ? error.message : String(error));
    if (found) return nestedShortfall(reason ?? tooLong);
    return nestingUnknown(reason ?? `listing the files to find them took longer than ${formatSeconds(timeoutMs)}`);
  }
}

function nestedShortfall(reason: string): string {
  return `repositories nested in the workspace were not fully searched (${reason}), so matches in them may be missing; narrow the path to search less of them`;
}

/** The nested part stopped before the listing found a nested repository: there may be none. */
function nestingUnknown(reason: string): string {
  return `could not tell whether nested repositories exist under the path searched (${reason}), so matches in any there may be missing; narrow the path to list less`;
}

function formatSeconds(milliseconds: number): string {
  return milliseconds >= 1_000 ? `${Math.round(milliseconds / 1_000)} s` : `${milliseconds} ms`;
}

/**
 * Answers a pattern git grep cannot compile before anything is listed: git grep compiles it
 * first, then finds nothing under a path that cannot exist, so this costs one short git run.
 */
async function checkGitGrepPattern(context: ToolboxContext, input: ToolInput<'grep'>, timeoutMs: number): Promise<void> {
  const check = engineInvocation(context, 'git-grep', input, { output: 'files', operands: { named: [NAMES_NOTHING] }, limit: 1 });
  const outcome = await streamRecords(check.command, check.args, {
    cwd: context.realRoot,
    env: check.env,
    separator: 0,
    maxRecordBytes: MAX_PATH_BYTES,
    timeoutMs,
    onRecord: () => true,
  });
  if (outcome.exitCode !== 0 && outcome.exitCode !== 1) throw searchFailed(outcome);
}

/** An engine that failed without finding anything: most often a pattern it cannot compile. */
function searchFailed(outcome: ProcessOutcome): ToolboxError {
  return new ToolboxError(
    'INVALID_INPUT',
    `grep failed: ${firstLine(outcome.stderr) || `exit ${outcome.exitCode}`}; check the pattern (extended regular expression)`,
  );
}

/** A run over named files: `names` as the engine prints them, and a test for a printed path that is one of them. */
type NamedFileRun = Invocation & { input?: Buffer; names: Buffer[]; isNamed: (rawPath: Buffer) => boolean };

/**
 * `pass` over files named by their raw paths: one xargs run fed them on stdin, or runs with them
 * as arguments.
 */
function namedFileRuns(
  context: ToolboxContext,
  engine: GrepEngine,
  input: ToolInput<'grep'>,
  pass: Output,
  files: readonly Buffer[],
): NamedFileRun[] {
  if (files.length === 0) return [];
  const xargs = findHelper(context, 'xargs');
  if (xargs) {
    // The engine by its absolute path: xargs would look a name up on the run's PATH.
    const search = engineInvocation(context, engine, input, { ...pass, operands: { named: [] } });
    const paths = Buffer.concat(files.flatMap((file) => [file, Buffer.of(0)]));
    return [
      {
        ...search,
        command: xargs,
        args: ['-0', '-r', `--max-args=${MAX_FILES_PER_RUN}`, search.command, ...search.args],
        input: paths,
        names: [...files],
        isNamed: namedPaths(files),
      },
    ];
  }
  return argumentBatches(files.map((file) => file.toString('utf8'))).map((batch) => {
    // An argument is UTF-8: a name that is not is searched (and printed) under its encoding.
    const names = batch.map((file) => Buffer.from(file));
    return { ...engineInvocation(context, engine, input, { ...pass, operands: { named: batch } }), names, isNamed: namedPaths(names) };
  });
}

/**
 * The second pass's runs over `files`, each with a reader of its output lines (a new one per
 * run: a reader may hold a part of a record). Output split at newlines splits a record wherever
 * the file name holds one, so such a file is searched in a run of its own, whose lines are read
 * as that file's records only (see the header); the others share runs as before.
 */
function secondPassRuns(
  context: ToolboxContext,
  engine: GrepEngine,
  input: ToolInput<'grep'>,
  pass: Output,
  files: readonly Buffer[],
): Array<NamedFileRun & { lineReader: () => (line: Buffer) => GrepMatch | undefined }> {
  const shared = namedFileRuns(
    context,
    engine,
    input,
    pass,
    files.filter((file) => !file.includes(NEWLINE)),
  ).map((run) => ({ ...run, lineReader: () => (line: Buffer) => (run.isNamed(pathOfLine(line)) ? run.parse(line) : undefined) }));
  const own = files
    .filter((file) => file.includes(NEWLINE))
    .flatMap((file) => namedFileRuns(context, engine, input, pass, [file]))
    .map((run) => ({ ...run, lineReader: () => linesOfOneFile(run.names[0]!, run.parse) }));
  return [...shared, ...own];
}

/**
 * Reads the lines of a run over the one file `name`, which holds newlines: each record arrives
 * cut into one piece more than the name has newlines. Pieces are joined while they spell the
 * start of `name` and a newline; a record is whole once it holds `name` and the NUL after it
 * (the line number and text that follow hold no newline). A piece that continues nothing starts
 * over, so whatever the file's text says, a record is this file's or none.
 */
function linesOfOneFile(name: Buffer, parse: (record: Buffer) => GrepMatch | undefined): (line: Buffer) => GrepMatch | undefined {
  const head = Buffer.concat([name, Buffer.of(0)]);
  let pending: Buffer | undefined;
  const read = (piece: Buffer, joined: Buffer): GrepMatch | undefined => {
    pending = undefined;
    if (joined.length >= head.length) {
      if (joined.subarray(0, head.length).equals(head)) return parse(joined);
    } else if (head.subarray(0, joined.length).equals(joined) && head[joined.length] === NEWLINE) {
      pending = joined;
      return undefined;
    }
    // Not this file's record: try the piece alone as the start of one.
    return joined === piece ? undefined : read(piece, piece);
  };
  return (line) => read(line, pending ? Buffer.concat([pending, Buffer.of(NEWLINE), line]) : line);
}

/** A test for a printed path: one of `files`, byte for byte. */
function namedPaths(files: readonly Buffer[]): (rawPath: Buffer) => boolean {
  const named = new Set(files.map((file) => file.toString('latin1')));
  return (rawPath) => named.has(rawPath.toString('latin1'));
}

/** The path a match line begins with (all three engines print `path\0` first); empty when it has none. */
function pathOfLine(record: Buffer): Buffer {
  const nul = record.indexOf(0);
  return nul === -1 ? Buffer.alloc(0) : record.subarray(0, nul);
}

interface Invocation {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  parse: (record: Buffer) => GrepMatch | undefined;
}

function engineInvocation(context: ToolboxContext, engine: GrepEngine, input: ToolInput<'grep'>, pass: Pass): Invocation {
  const caseFlag = input.ignoreCase ? ['-i'] : [];
  const operands = 'named' in pass.operands ? pass.operands.named : [pass.operands.scope];
  const named = 'named' in pass.operands;
  const perFile = pass.output === 'lines' ? [`--max-count=${pass.limit + 1}`] : [];
  switch (engine) {
    case 'rg':
      return {
        command: helperProgram(context, 'rg'),
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
          // A named file that became a directory is not searched through (see the header).
          ...(named ? ['--max-depth=0'] : []),
          ...caseFlag,
          ...(pass.output === 'files' ? ['--files-with-matches'] : ['--no-heading', '--with-filename', '--line-number', ...perFile]),
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
        command: helperProgram(context, 'git'),
        args: [
          'grep',
          // A named file is searched wherever it lies, in a nested repository too, which the
          // index knows nothing of; the first pass or the listing chose it, ignore rules and all.
          // --max-depth=0: a named file that became a directory is read to no depth (see the header).
          ...(named ? ['--no-index', '--max-depth=0'] : ['--untracked', ...(input.includeIgnored ? ['--no-exclude-standard'] : [])]),
          '--no-color',
          '-z',
          '-I',
          '-E',
          ...caseFlag,
          // No --max-count: git grep has it only since 2.38; the selection bounds memory anyway.
          ...(pass.output === 'files' ? ['-l'] : ['-n']),
          '-e',
          anchorsAsReadFileShows(input.pattern),
          '--',
          ...operands,
        ],
        env: gitEnvironment(context),
        parse: parseGitGrep,
      };
    case 'grep':
      return {
        command: helperProgram(context, 'grep'),
        args: [
          '-s',
          '-I',
          '-E',
          '-Z',
          // A FIFO or device named to it is opened without waiting and skipped (see the header).
          '-D',
          'skip',
          ...(pass.output === 'files' ? ['-l', ...(named ? [] : ['-r', '--exclude-dir=.git'])] : ['-n', '-H', ...perFile]),
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

/** The absolute path of an engine's program, never looked up on the run's PATH (helper-programs.ts). */
function helperProgram(context: ToolboxContext, name: HelperName): string {
  const program = findHelper(context, name);
  if (!program) throw new ToolboxError('IO_ERROR', `${name} is not installed in this sandbox (outside the workspace)`);
  return program;
}

/** By path, then by the bytes the path came from: two names that are not UTF-8 may show alike. */
function compareFiles(a: MatchingFile, b: MatchingFile): number {
  return compareCodeUnits(a.path, b.path) || Buffer.compare(a.raw, b.raw);
}

/** The first `limit` matches by path, then line: the order results are sorted and cut in. */
function compareMatches(a: GrepMatch, b: GrepMatch): number {
  return compareCodeUnits(a.path, b.path) || a.line - b.line;
}

/** Paths in runs of at most MAX_FILES_PER_RUN whose argument bytes stay within MAX_ARGUMENT_BYTES. */
function argumentBatches(paths: readonly string[]): string[][] {
  const batches: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const file of paths) {
    const size = Buffer.byteLength(file) + 1;
    if (current.length > 0 && (bytes + size > MAX_ARGUMENT_BYTES || current.length === MAX_FILES_PER_RUN)) {
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
