// What a diff from a sandbox may not hold before a worker applies it (publish, continueFrom):
// the parts where `git apply` writes far more than the diff's own bytes. The text comes from
// the sandbox, where code can change what git prints, so it is checked here, not trusted.
//
// - A binary patch is compressed: a hand-made 131 KB one wrote a 100 MiB file. take-diff.ts
//   runs `git diff` without --binary, so a diff the operator took never has one ("Binary files
//   a/x and b/x differ" stands for such a file).
// - A copy (`copy from` / `copy to`) writes the whole source file for about 80 bytes of diff:
//   a 7.9 KB diff of copies of a 4 MiB file wrote 405 MiB, and a 1 MiB diff of copies of a
//   file near maxCheckoutBytes would ask for terabytes. take-diff.ts pins rename detection
//   without copies (`-c diff.renames=true`), so a diff the operator took never has one; a copy
//   made in the sandbox shows as a new file, its bytes in the diff. A rename moves its source
//   (git refuses a second rename of it), so it writes no more than it removes.
// - Two patches of one path: `git apply` holds a whole copy of the file for each, so 200
//   one-line patches of an 11 MB file (a 53 KB diff) took 2.2 GB. `git diff` writes each path
//   once, but for a file whose type changes (a file made a symlink, or back): its deletion,
//   then its creation. That pair is taken (typeChange below), nothing else repeated. The paths
//   are git's own parse of the diff (`git apply --numstat -z`), not this module's reading of
//   its headers, which a diff can spell in more than one way.
// Pure.
import { parseDiffFiles, type FileChange } from '../evals/diff-files.ts';

/** Why the diff is not applied, or undefined when nothing in it is refused. */
export function diffRefusal(diff: string): string | undefined {
  // Split on \n alone, as git does (a hunk line may hold a \r). These are git's extended header
  // lines; no line of a hunk can start this way (they start with ' ', '+', '-' or '\').
  const lines = diff.split('\n');
  if (lines.some((line) => line === 'GIT binary patch'))
    return 'the diff holds a binary patch, which the operator never takes from a sandbox (it keeps text changes only): it was not applied';
  if (lines.some((line) => line.startsWith('copy from ') || line.startsWith('copy to ')))
    return 'the diff copies a file (copy from/copy to), which the operator never takes from a sandbox (a copy is a new file there): it was not applied';
  return undefined;
}

/** One patch of a diff as `git apply --numstat -z` lists it: lines added and deleted ('-' for binary) and its paths. */
export interface ListedPatch {
  added: string;
  deleted: string;
  /** One path; for a rename, the old and the new. */
  paths: string[];
}

/**
 * Each patch of a diff as git reads it, from `git apply --numstat -z` (one entry per patch:
 * added, deleted and the path; for a rename, the two paths after it).
 */
export function numstatEntries(numstat: string): ListedPatch[] {
  const patches: ListedPatch[] = [];
  const tokens = numstat.split('\0');
  for (let index = 0; index < tokens.length; index++) {
    const entry = /^(\d+|-)\t(\d+|-)\t([\s\S]*)$/.exec(tokens[index]!);
    if (!entry) continue;
    const paths = entry[3] ? [entry[3]] : [tokens[++index] ?? '', tokens[++index] ?? ''];
    patches.push({ added: entry[1]!, deleted: entry[2]!, paths });
  }
  return patches;
}

/** The paths of each patch of a diff as git reads it (numstatEntries). */
export const numstatPatches = (numstat: string): string[][] => numstatEntries(numstat).map((patch) => patch.paths);

/**
 * Whether patches `at` and `at + 1` are how `git diff` writes a type change of one path: the
 * old file deleted, then the new one created. The headers say deletion and creation, and git's
 * counts agree (the first adds no line, the second removes none), so git holds the old file
 * once, to remove it, and the new one comes whole from the diff. Were git to read the pair as
 * two edits after all, it would hold at most two copies of the file: bounded, unlike the 200.
 * headerMismatchRefusal checks that these headers are the patches git reads.
 */
function typeChange(patches: readonly ListedPatch[], files: readonly FileChange[], at: number): boolean {
  const [deletion, creation] = [patches[at], patches[at + 1]];
  return (
    deletion?.paths.length === 1 &&
    creation?.paths.length === 1 &&
    deletion.paths[0] === creation.paths[0] &&
    deletion.added === '0' &&
    creation.deleted === '0' &&
    files[at]?.kind === 'deleted' &&
    files[at + 1]?.kind === 'added'
  );
}

/**
 * Why the diff is not applied, from git's list of its patches: a path that two patches change,
 * but for a type change (a deletion, then a creation of the path, right after it).
 */
export function repeatedPathRefusal(diff: string, numstat: string): string | undefined {
  const patches = numstatEntries(numstat);
  const files = parseDiffFiles(diff);
  const seen = new Set<string>();
  for (const [at, patch] of patches.entries()) {
    // A type change's creation names again the path its deletion, just before, named first: a
    // third patch of that path is refused like any other repeat.
    if (at > 0 && typeChange(patches, files, at - 1)) continue;
    for (const path of patch.paths) {
      if (seen.has(path))
        return `the diff changes ${JSON.stringify(path.slice(0, 200))} in more than one patch, which git diff writes only for a file whose type changes (its deletion, then its creation): it was not applied`;
      seen.add(path);
    }
  }
  return undefined;
}

/**
 * Why the diff is not applied when git would change other files than its headers name: what
 * the operator shows of a diff (status, the publish approval's file list, the evals' graders)
 * is read from its `diff --git` headers (evals/diff-files.ts), and what is pushed or continued
 * is what `git apply` does with it. The sandbox can make them differ: `git config
 * diff.noprefix true` prints `diff --git examples/.github/x examples/.github/x`, which git
 * applies to `.github/x`; code in the sandbox can write a traditional patch into the diff
 * after a hunk, which the headers never name. The approver must approve the files that change.
 */
export function headerMismatchRefusal(diff: string, numstat: string): string | undefined {
  const patches = numstatPatches(numstat);
  const files = parseDiffFiles(diff);
  if (patches.length !== files.length)
    return `the diff holds ${patches.length} patch(es) as git reads it but ${files.length} 'diff --git' header(s), so what it shows is not what it changes: it was not applied`;
  for (const [index, file] of files.entries()) {
    const named = file.oldPath !== undefined && file.oldPath !== file.path ? [file.oldPath, file.path] : [file.path];
    const patch = patches[index]!;
    // git lists a rename's two paths, and a changed file's one: as the header names them.
    const same =
      patch.length === named.length ? patch.every((path, at) => path === named[at]) : patch.length === 1 && patch[0] === file.path;
    if (!same)
      return `the diff's header names ${JSON.stringify(named.join(' -> ').slice(0, 200))} but git would change ${JSON.stringify(patch.join(' -> ').slice(0, 200))}, so what it shows is not what it changes: it was not applied`;
  }
  return undefined;
}

/** Why the diff is not applied, from git's list of its patches (`git apply --numstat -z`). */
export const listedPatchesRefusal = (diff: string, numstat: string): string | undefined =>
  repeatedPathRefusal(diff, numstat) ?? headerMismatchRefusal(diff, numstat);
