// What `git apply` of a diff from a sandbox may cost the operator (publish, continueFrom),
// judged before it runs from the diff and the files it names in the tree being patched
// (apply-diff.ts reads their sizes and lines from git). The diff is a model's, at most 1 MiB,
// but what git does with it depends on the files it names, and git runs in the operator's
// container: memory there is every namespace's, a worker slot too. git runs held to
// maxGitMemoryBytes (git-runner.ts), so what this misjudges fails that apply alone; judged
// here, a diff that would not fit is refused before git starts, with the figures. Pure.
//
// Measured with git 2.39 (the image's): repositories and diffs of each shape below, the need
// taken as the smallest `ulimit -d` (what the operator sets, git-limits.ts) under which `git
// apply` succeeds, in the work tree (continueFrom) and with --index from a packed repository
// (publish), whichever is more; the max RSS (`/usr/bin/time -v`) is lower, RLIMIT_DATA counts
// what git allocates, not what it touches.
// - Memory. git reads each file a patch names whole (an edit, a deletion, a rename even without
//   a hunk) and keeps it, patched, until it has patched them all, then writes them. It reads a
//   file into a buffer it grows to half again the file's size, copies the file whole to a new
//   one at each hunk it places, and builds a 16-byte entry per line of it, in a table it grows
//   by half again too: the file it is patching it holds up to three times, and one it renames
//   without a hunk it keeps as read. Needed (the old estimate here in brackets): a one-line
//   edit of a 60 MiB file, 169 MiB (76); of 16 MiB, 46 MiB (20), 53 with 20 hunks; of a 4 MiB
//   file of empty lines, 104 MiB (68); four 14 MiB files renamed, 94 MiB (60); 1 000 one-line
//   edits of 60 KB files 60.2 MiB (58), 3 000 of 4 KB files 16.5 MiB (14); git itself 1.7 MiB.
//   With --index, git also holds the index, under twice its file (100 000 files, an 8.3 MiB
//   index: 15 MiB), and a file stored as a delta reads its base too (a 14 MiB one: 48 MiB). The estimate below is
//   above each of these. Without the limit, at the chart's maxCheckoutBytes, a 1 MiB diff
//   could ask for more than the operator's 1 GiB, and the kernel's OOM killer then ends the
//   whole container (memory.oom.group), every namespace's jobs with it.
// - CPU. A hunk git does not find at the line it names is looked for at every line of the file,
//   each try comparing up to the hunk's old lines: 10 000 lines of context over a 200 000-line
//   file of the same line took 1.2 s of CPU (0.6 ns a line), 12 000 over a million lines 12 s,
//   and at that rate a 1 MiB diff over a 2 MB file takes minutes, past the 120 s timeout. A diff
//   git diff made on this very commit never needs the search (its hunks are where they say), so
//   only a hand-made one pays it.
import { numstatEntries } from './diff-refusal.ts';
import { GIT_MEMORY_LIMIT_BYTES } from './git-limits.ts';

/** A file of the tree being patched, as git stores it (the clone's checkout is its blobs, byte for byte: git-clone.ts). */
export interface TreeFile {
  bytes: number;
  lines: number;
}

/** The files the diff's patches name that the tree holds, by path, as far as they were read. */
export interface NamedFiles {
  files: ReadonlyMap<string, TreeFile>;
  /** False when the reading stopped once their sizes passed the memory bound: `files` holds only the first. */
  complete: boolean;
  /** The size of the index file, which `git apply --index` (publish) holds whole; absent for an apply to the work tree alone. */
  indexBytes?: number | undefined;
}

export interface ApplyBudget {
  /** Bytes one `git apply` may hold (estimated from the files it reads and the diff). */
  memoryBytes: number;
  /** Line comparisons git may make looking for the hunks: lines of each patched file times its hunks' old lines. */
  lineComparisons: number;
}

const MiB = 1024 * 1024;

/**
 * The memory: what each git the operator runs may have (maxGitMemoryBytes, 64 MiB by default,
 * git-limits.ts), which is what `git apply` runs under: at 64 MiB a one-line edit of a file of
 * 17 MiB of 40-byte lines fits, and a diff that edits a few MiB of files is far under it.
 * 10^10 comparisons: about 6 s of one core of the machine measured above (0.6 ns each). The
 * bound counts what the search could cost, not what a diff's hunks found where they say do
 * cost, so a real diff is refused only when it changes very much of a very large file: 10 000
 * old lines of hunks in a file of a million lines.
 */
export const APPLY_BUDGET: ApplyBudget = { memoryBytes: GIT_MEMORY_LIMIT_BYTES, lineComparisons: 10_000_000_000 };

/** The budget of an apply whose git may have `maxGitMemoryBytes` (git-limits.ts). */
export function applyBudget(maxGitMemoryBytes: number): ApplyBudget {
  return { ...APPLY_BUDGET, memoryBytes: maxGitMemoryBytes };
}

/** git itself, before it reads the diff or a file: its code's data, its libraries', its config. */
const GIT_OWN_BYTES = 2 * MiB;
/** A file read from the work tree is read into a buffer git grows to half again its size, to find its end. */
const READ_BUFFER_GROWTH = 1.5;
/** What git holds per line of the file it is patching (`struct line`: a length, a hash and flags, 16 bytes), in a table grown by half again. */
const LINE_ENTRY_BYTES = 24;
/** Each patch's own: its structures, names, result buffer's header, what the heap cannot hand back between them (3 000 patches of 4 KB files: under 1 KiB each). */
const PATCH_BYTES = 2 * 1024;
/** The index in memory against its file: an entry of a 19-byte path took 139 bytes, of a 122-byte one 241, on disk 87 and 191. */
const INDEX_PER_FILE_BYTE = 2;

const inMiB = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

const WHAT_TO_DO =
  'it was not applied; apply it outside the operator (kubectl codingrun diff prints it), or make the change in runs that each change less';

/**
 * Lines of each `diff --git` section that a hunk may match against the file: context (' '),
 * removed ('-', the `---` header too) and empty lines (git reads one as empty context). git
 * reads no hunk line past the next `diff --git` header, so each count bounds the old lines of
 * that patch's hunks; headerMismatchRefusal has checked that these sections are git's patches.
 */
export function oldLineCounts(diff: string): number[] {
  const counts: number[] = [];
  const lines = diff.split('\n');
  // The diff's last newline ends its last line; it starts no empty one.
  if (lines.at(-1) === '') lines.pop();
  for (const line of lines) {
    if (line.startsWith('diff --git ')) counts.push(0);
    else if (counts.length > 0 && (line === '' || line[0] === ' ' || line[0] === '-')) counts[counts.length - 1]!++;
  }
  return counts;
}

/** A patch as git reads it: the path it reads the file from (its old name), and the lines it adds and removes. */
export interface PatchRead {
  path: string;
  added: number;
  deleted: number;
}

/**
 * Each patch's path git reads, in the diff's order, from git's own two lists of the patches:
 * `git apply --numstat -z` names each by its new name (a rename's target), and with `-R` by its
 * old one (a rename's source, a deletion's path; a new file's own), which is what git reads,
 * listing them last patch first. Undefined when the lists do not pair up.
 */
export function patchesRead(numstat: string, reversedNumstat: string): PatchRead[] | undefined {
  const forward = numstatEntries(numstat);
  const backward = numstatEntries(reversedNumstat).reverse();
  if (forward.length !== backward.length || backward.some((patch) => patch.paths.length !== 1)) return undefined;
  return forward.map((patch, index) => ({
    path: backward[index]!.paths[0]!,
    added: Number(patch.added) || 0,
    deleted: Number(patch.deleted) || 0,
  }));
}

/**
 * What `git apply` holds at most (the file's header has the figures): git itself; every file it
 * reads, kept patched, or as read (half again its size) by a patch without a hunk; the largest
 * twice more while it patches it (its read buffer and its copy at a hunk) with the table of its
 * lines; the diff, read into a buffer grown likewise, with the lines of its hunks and each
 * patch's own; and with --index, the index.
 */
function applyMemory(diff: string, diffLines: number, patches: number, read: readonly ReadFile[], indexBytes: number): number {
  const kept = read.reduce((sum, { file, hunks }) => sum + (hunks ? file.bytes : READ_BUFFER_GROWTH * file.bytes), 0);
  const largest = read.reduce((most, { file }) => Math.max(most, file.bytes), 0);
  const mostLines = read.reduce((most, { file }) => Math.max(most, file.lines), 0);
  return Math.ceil(
    GIT_OWN_BYTES +
      kept +
      2 * largest +
      LINE_ENTRY_BYTES * mostLines +
      2 * Buffer.byteLength(diff) +
      LINE_ENTRY_BYTES * diffLines +
      PATCH_BYTES * patches +
      INDEX_PER_FILE_BYTE * indexBytes,
  );
}

/** A file git reads, and whether a patch of it places a hunk (which leaves the file copied to its exact size). */
interface ReadFile {
  file: TreeFile;
  hunks: boolean;
}

/** Why a diff is not applied when git ran out of its memory applying it (what the estimate above did not foresee): git-runner.ts's message, and what to do. */
export function applyOutOfMemoryRefusal(gitOutOfMemory: string): string {
  return `${gitOutOfMemory}, to hold the files the diff's patches read: ${WHAT_TO_DO}`;
}

/**
 * Why the diff is not applied, from what git would hold and search to apply it: undefined when
 * it fits `budget`. `patches` are git's (patchesRead); `named`, the files of the tree at the
 * paths they read.
 */
export function applyCostRefusal(
  diff: string,
  patches: readonly PatchRead[],
  named: NamedFiles,
  budget: ApplyBudget = APPLY_BUDGET,
): string | undefined {
  // Each path git reads once: a type change's deletion reads the file, its creation does not.
  const read = [...new Set(patches.map((patch) => patch.path))].flatMap((path): ReadFile[] => {
    const file = named.files.get(path);
    const hunks = patches.every((patch) => patch.path !== path || patch.added + patch.deleted > 0);
    return file ? [{ file, hunks }] : [];
  });
  const fileBytes = read.reduce((sum, { file }) => sum + file.bytes, 0);
  if (!named.complete)
    return `the diff's patches read files of more than ${inMiB(fileBytes)} in all, which git apply holds in memory at once, over the ${inMiB(budget.memoryBytes)} each git the operator runs may have: ${WHAT_TO_DO}`;
  const diffLines = diff.split('\n').length;
  const memory = applyMemory(diff, diffLines, patches.length, read, named.indexBytes ?? 0);
  if (memory > budget.memoryBytes)
    return `the diff's patches read ${read.length} file(s) of ${inMiB(fileBytes)} in all, which git apply holds in memory at once with a table of each file's lines: about ${inMiB(memory)}, over the ${inMiB(budget.memoryBytes)} each git the operator runs may have: ${WHAT_TO_DO}`;
  const oldLines = oldLineCounts(diff);
  let comparisons = 0;
  for (const [index, patch] of patches.entries()) {
    const file = named.files.get(patch.path);
    // The file grows by the lines the patch adds while its hunks are placed one after another.
    if (file) comparisons += (file.lines + patch.added) * (oldLines[index] ?? diffLines);
  }
  if (comparisons > budget.lineComparisons)
    return `the diff's hunks could make git apply compare ${comparisons} lines, looking for each hunk that is not at the line it names at every line of its file, over the ${budget.lineComparisons} the operator allows: ${WHAT_TO_DO}`;
  return undefined;
}
