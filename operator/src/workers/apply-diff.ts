// `git apply` of a source run's diff in the worker's fresh clone (spec.continueFrom), before
// the tree goes into the sandbox. The diff is what a model wrote, so git gets it on stdin, runs
// without hooks or any config of the machine, and keeps its default refusals: no path outside
// the tree, none through a symlink. New files stay untracked, as they were in the source's
// sandbox; the finalize job's `git add --intent-to-add` counts them in the follow-up's diff.
// Before git applies it, what it would hold and search is judged from the files it names
// (apply-budget.ts), so a small diff cannot take the operator's container down.
import { applyCostRefusal, APPLY_BUDGET, patchesRead, type NamedFiles, type TreeFile } from './apply-budget.ts';
import { diffRefusal, listedPatchesRefusal } from './diff-refusal.ts';
import { OutputTail } from './output-tail.ts';
import { launchHere, type Launch } from './process-launcher.ts';

/**
 * git's HOME: none. The clone is the repository's, and git reads attributes and ignore rules
 * from $HOME/.config/git: a HOME in the clone let the repository give them.
 */
const NO_HOME = '/nonexistent';

export type ApplyOutcome = { applied: true } | { applied: false; output: string };

export async function applyDiff(dir: string, diff: string, launch: Launch = launchHere, timeoutMs = 120_000): Promise<ApplyOutcome> {
  const refused = diffRefusal(diff);
  if (refused) return { applied: false, output: refused };
  // git's own list of the diff's patches first (it reads no file): a path patched twice, or
  // patches other than the headers name, are refused.
  const listed = await gitApply(dir, ['--numstat', '-z'], diff, launch, timeoutMs);
  if (listed.code !== 0) return { applied: false, output: listed.stderr };
  const listRefusal = listedPatchesRefusal(diff, listed.stdout);
  if (listRefusal) return { applied: false, output: listRefusal };
  const costRefusal = await applyCostRefusalIn(dir, diff, listed.stdout, launch, timeoutMs);
  if (costRefusal) return { applied: false, output: costRefusal };
  const applied = await gitApply(dir, ['--whitespace=nowarn'], diff, launch, timeoutMs);
  return applied.code === 0 ? { applied: true } : { applied: false, output: applied.timedOut ? 'git apply timed out' : applied.stderr };
}

/**
 * Why git should not apply the diff in `dir`, from what it would hold and search doing it
 * (apply-budget.ts): the paths git reads, from its own lists of the patches (`numstat`, and
 * the same reversed, which names each patch's old path), and those files in HEAD's tree.
 * Undefined when it fits. Also publish's (publish-git.ts), before its `git apply --index`.
 * Only once listedPatchesRefusal has passed: the lines of each patch's hunks are counted by
 * `diff --git` section, which it checks are git's patches, one for one.
 */
export async function applyCostRefusalIn(
  dir: string,
  diff: string,
  numstat: string,
  launch: Launch = launchHere,
  timeoutMs = 120_000,
): Promise<string | undefined> {
  const reversed = await gitApply(dir, ['-R', '--numstat', '-z'], diff, launch, timeoutMs);
  if (reversed.code !== 0) return reversed.timedOut ? 'git apply -R --numstat timed out' : reversed.stderr;
  const patches = patchesRead(numstat, reversed.stdout);
  if (!patches) return "git lists the diff's patches differently read backwards, so the files it reads are not known: it was not applied";
  const named = await readNamedFiles(
    dir,
    patches.map((patch) => patch.path),
    launch,
    APPLY_BUDGET.memoryBytes,
    timeoutMs,
  );
  if ('failed' in named) return `${named.failed} (reading the sizes of the files the diff changes)`;
  return applyCostRefusal(diff, patches, named.named);
}

const isolatedEnvironment = (): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: NO_HOME,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
});

interface GitExit {
  code: number | null;
  stderr: string;
  timedOut: boolean;
  /** `onStdout` asked to stop, and git was killed. */
  stopped: boolean;
}

/**
 * git ARGS in `dir`, without hooks or the machine's config, `input` on its stdin, its stdout
 * handed to `onStdout` as it comes (which returns false to stop git).
 */
function runGit(
  dir: string,
  args: readonly string[],
  input: string,
  onStdout: (chunk: Buffer) => boolean,
  launch: Launch,
  timeoutMs: number,
): Promise<GitExit> {
  return new Promise((resolve, reject) => {
    const child = launch('git', ['-c', 'core.hooksPath=/dev/null', ...args], {
      cwd: dir,
      env: isolatedEnvironment(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stopped = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (stopped || onStdout(chunk)) return;
      stopped = true;
      child.kill('SIGKILL');
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    // A git that exits before reading all of stdin (a corrupt patch, a stop) closes the pipe: not our error.
    child.stdin!.on('error', () => undefined);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, timedOut, stopped });
    });
    child.stdin!.end(input);
  });
}

/** `git apply ARGS -` in `dir` with the diff on stdin. */
async function gitApply(
  dir: string,
  args: readonly string[],
  diff: string,
  launch: Launch,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }> {
  const stdout = new OutputTail(4_000_000);
  const exit = await runGit(dir, ['apply', ...args, '-'], diff, (chunk) => (stdout.push(chunk), true), launch, timeoutMs);
  return { code: exit.code, stdout: stdout.text(), stderr: exit.stderr, timedOut: exit.timedOut };
}

/** Splits a NUL-separated stream into its records, across chunks. */
function nulRecords(onRecord: (record: Buffer) => void): (chunk: Buffer) => boolean {
  let rest = Buffer.alloc(0);
  return (chunk) => {
    const bytes = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
    let start = 0;
    for (let end = bytes.indexOf(0, start); end !== -1; end = bytes.indexOf(0, start)) {
      onRecord(bytes.subarray(start, end));
      start = end + 1;
    }
    rest = Buffer.from(bytes.subarray(start));
    return true;
  };
}

/**
 * The blobs of HEAD's tree at `paths` (git's spelling, from `git apply --numstat -z`): the size
 * and lines of each, which is what `git apply` reads of them (apply-budget.ts). They come from
 * git's object store, not the checkout, so no path is followed out of the tree, and a path is
 * matched as git prints it (the tree's listing and numstat decoded alike: one UTF-8 reading of
 * the whole name). Reading stops once the sizes pass `stopAfterBytes`, since the diff is
 * refused then whatever the rest holds: no more than that is read. A path of an object other
 * than a file (a directory, a submodule) or none is left out: git reads nothing there.
 */
export async function readNamedFiles(
  dir: string,
  paths: readonly string[],
  launch: Launch,
  stopAfterBytes: number,
  timeoutMs: number,
): Promise<{ named: NamedFiles } | { failed: string }> {
  const wanted = new Set(paths);
  const files = new Map<string, TreeFile>();
  if (wanted.size === 0) return { named: { files, complete: true } };
  // Blob id -> the paths that hold it (a file copied in the tree is read once per path).
  const holders = new Map<string, string[]>();
  const listing = await runGit(
    dir,
    ['ls-tree', '-r', '-z', '--full-tree', 'HEAD'],
    '',
    nulRecords((record) => {
      // <mode> SP <type> SP <object> TAB <path>
      const tab = record.indexOf(9);
      const path = record.subarray(tab + 1).toString('utf8');
      if (tab < 0 || !wanted.has(path)) return;
      const [, type, object] = record.subarray(0, tab).toString('latin1').split(' ');
      if (type !== 'blob' || !object) return;
      holders.set(object, [...(holders.get(object) ?? []), path]);
    }),
    launch,
    timeoutMs,
  );
  if (listing.code !== 0) return { failed: listing.timedOut ? 'git ls-tree timed out' : `git ls-tree failed: ${listing.stderr.trim()}` };
  if (holders.size === 0) return { named: { files, complete: true } };
  let total = 0;
  let complete = true;
  const reader = new BlobLines(
    (object, bytes) => {
      const holding = holders.get(object) ?? [];
      total += bytes * holding.length;
      if (total <= stopAfterBytes) return true;
      // Over the bound with this one: counted by its size, its lines not read.
      for (const path of holding) files.set(path, { bytes, lines: 0 });
      complete = false;
      return false;
    },
    (object, file) => {
      for (const path of holders.get(object) ?? []) files.set(path, file);
    },
  );
  const reading = await runGit(
    dir,
    ['cat-file', '--batch'],
    [...holders.keys()].join('\n') + '\n',
    (chunk) => reader.push(chunk),
    launch,
    timeoutMs,
  );
  if (!reading.stopped && reading.code !== 0)
    return { failed: reading.timedOut ? 'git cat-file timed out' : `git cat-file failed: ${reading.stderr.trim()}` };
  return { named: { files, complete } };
}

/**
 * Reads `git cat-file --batch` as it comes: for each object its header (`<id> <type> <size>`,
 * or `<id> missing`), then its bytes and a newline. Counts each blob's lines (its newlines, and
 * a last line without one) without keeping it. `onSize` hears each size first and returns false
 * to stop; `onFile` gets each whole blob's size and lines.
 */
class BlobLines {
  private header = '';
  private object = '';
  private left = -1;
  private size = 0;
  private lines = 0;
  private last = 10;

  constructor(
    private readonly onSize: (object: string, bytes: number) => boolean,
    private readonly onFile: (object: string, file: TreeFile) => void,
  ) {}

  /** Takes a chunk of the output; false once `onSize` asked to stop. */
  push(chunk: Buffer): boolean {
    let at = 0;
    while (at < chunk.length) {
      if (this.left < 0) {
        const end = chunk.indexOf(10, at);
        this.header += chunk.subarray(at, end < 0 ? chunk.length : end).toString('latin1');
        if (end < 0) return true;
        at = end + 1;
        const [object = '', type, size] = this.header.split(' ');
        this.header = '';
        if (type === undefined || size === undefined) continue; // `<id> missing`: nothing follows
        this.object = object;
        this.size = Number(size);
        this.left = this.size + 1; // its bytes, then a newline
        this.lines = 0;
        this.last = 10;
        if (!this.onSize(object, this.size)) return false;
        continue;
      }
      const take = Math.min(this.left, chunk.length - at);
      // The blob's own bytes; the newline git adds after it is not the blob's.
      const own = Math.min(take, this.left - 1);
      for (let index = at; index < at + own; index++) if (chunk[index] === 10) this.lines++;
      if (own > 0) this.last = chunk[at + own - 1]!;
      at += take;
      this.left -= take;
      if (this.left === 0) {
        this.onFile(this.object, { bytes: this.size, lines: this.lines + (this.last === 10 ? 0 : 1) });
        this.left = -1;
      }
    }
    return true;
  }
}

/** The commit checked out in `dir` (full SHA). */
export function headRevision(dir: string, launch: Launch = launchHere): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = launch('git', ['rev-parse', '--verify', 'HEAD^{commit}'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: NO_HOME, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout.trim()) : reject(new Error(`git rev-parse HEAD failed: ${stderr.trim()}`))));
  });
}
