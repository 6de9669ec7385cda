// What `git apply` of a diff from a sandbox may cost the operator (publish, continueFrom),
// judged before it runs from the diff and the files it names in the tree being patched
// (apply-diff.ts reads their sizes and lines from git). The diff is a model's, at most 1 MiB,
// but what git does with it depends on the files it names, and git runs in the operator's
// container: memory there is every namespace's, a worker slot too. Pure.
//
// Measured with git 2.39 (the image's):
// - Memory. git reads each file a patch names whole (an edit, a deletion, a rename even without
//   a hunk) and keeps it until it has patched them all, then writes them; while it patches one
//   it also holds a 16-byte entry per line of it (its `struct line`). 2 000 one-line patches of
//   100 KB files (a 270 KB diff) took 205 MB; one of a 32 MiB file of empty lines, 594 MB. At
//   the chart's maxCheckoutBytes, a 1 MiB diff could ask for more than the operator's 1 GiB
//   limit, and the kernel's OOM killer then ends the whole container (memory.oom.group), every
//   namespace's jobs with it, and the retried job again.
// - CPU. A hunk git does not find at the line it names is looked for at every line of the file,
//   each try comparing up to the hunk's old lines: 10 000 lines of context over a 200 000-line
//   file of the same line took 1.2 s of CPU (0.6 ns a line), 12 000 over a million lines 12 s,
//   and at that rate a 1 MiB diff over a 2 MB file takes minutes, past the 120 s timeout. A diff
//   git diff made on this very commit never needs the search (its hunks are where they say), so
//   only a hand-made one pays it.
import { numstatEntries } from './diff-refusal.ts';

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
}

export interface ApplyBudget {
  /** Bytes one `git apply` may hold (estimated from the files it reads and the diff). */
  memoryBytes: number;
  /** Line comparisons git may make looking for the hunks: lines of each patched file times its hunks' old lines. */
  lineComparisons: number;
}

const MiB = 1024 * 1024;

/**
 * 64 MiB: the chart gives the operator 1 GiB, of which the heap (heapLimitMiB 160) and the 150
 * MiB it keeps for code, buffers and children leave about 700 MiB; workerConcurrency (8) jobs
 * may each apply a diff at once, which at 64 MiB each is 512 MiB, with room for the clones'
 * own git. A diff that edits even a few MiB of files is far under it.
 * 10^10 comparisons: about 6 s of one core of the machine measured above (0.6 ns each). The
 * bound counts what the search could cost, not what a diff's hunks found where they say do
 * cost, so a real diff is refused only when it changes very much of a very large file: 10 000
 * old lines of hunks in a file of a million lines (40 MB of code, near the memory bound).
 */
export const APPLY_BUDGET: ApplyBudget = { memoryBytes: 64 * MiB, lineComparisons: 10_000_000_000 };

/** What git holds per line of the file it is patching (`struct line`: a length, a hash and flags). */
const LINE_ENTRY_BYTES = 16;

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

/** A patch as git reads it: the path it reads the file from (its old name), and the lines it adds. */
export interface PatchRead {
  path: string;
  added: number;
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
  return forward.map((patch, index) => ({ path: backward[index]!.paths[0]!, added: Number(patch.added) || 0 }));
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
  const read = [...new Set(patches.map((patch) => patch.path))].flatMap((path) => named.files.get(path) ?? []);
  const fileBytes = read.reduce((sum, file) => sum + file.bytes, 0);
  if (!named.complete)
    return `the diff's patches read files of more than ${inMiB(fileBytes)} in all, which git apply holds in memory at once, over the ${inMiB(budget.memoryBytes)} the operator lets one apply take: ${WHAT_TO_DO}`;
  const diffLines = diff.split('\n').length;
  // The files it keeps; the line table of the largest, while it patches it; the diff, parsed, and the lines of its hunks.
  const mostLines = read.reduce((most, file) => Math.max(most, file.lines), 0);
  const memory = fileBytes + LINE_ENTRY_BYTES * mostLines + 2 * Buffer.byteLength(diff) + LINE_ENTRY_BYTES * diffLines;
  if (memory > budget.memoryBytes)
    return `the diff's patches read ${read.length} file(s) of ${inMiB(fileBytes)} in all, which git apply holds in memory at once with a table of each file's lines: about ${inMiB(memory)}, over the ${inMiB(budget.memoryBytes)} the operator lets one apply take: ${WHAT_TO_DO}`;
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
