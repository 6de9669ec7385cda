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
//   once. The paths are git's own parse of the diff (`git apply --numstat -z`), not this
//   module's reading of its headers, which a diff can spell in more than one way.
// Pure.

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

/**
 * Why the diff is not applied, from what `git apply --numstat -z` lists of it (one entry per
 * patch: added, deleted and the path; for a rename, possibly the two paths after it): a path
 * that two patches change.
 */
export function repeatedPathRefusal(numstat: string): string | undefined {
  const seen = new Set<string>();
  const tokens = numstat.split('\0');
  for (let index = 0; index < tokens.length; index++) {
    const entry = /^(?:\d+|-)\t(?:\d+|-)\t([\s\S]*)$/.exec(tokens[index]!);
    if (!entry) continue;
    const paths = entry[1] ? [entry[1]] : [tokens[++index] ?? '', tokens[++index] ?? ''];
    for (const path of paths) {
      if (seen.has(path))
        return `the diff changes ${JSON.stringify(path.slice(0, 200))} in more than one patch, which git diff never writes: it was not applied`;
      seen.add(path);
    }
  }
  return undefined;
}
