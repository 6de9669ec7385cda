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
// Pure.

const BINARY_PATCH = /^GIT binary patch$/m;
/** git's extended header lines of a copy; no line of a hunk can start this way (they start with ' ', '+', '-' or '\'). */
const COPY = /^copy (from|to) /m;

/** Why the diff is not applied, or undefined when nothing in it is refused. */
export function diffRefusal(diff: string): string | undefined {
  if (BINARY_PATCH.test(diff))
    return 'the diff holds a binary patch, which the operator never takes from a sandbox (it keeps text changes only): it was not applied';
  if (COPY.test(diff))
    return 'the diff copies a file (copy from/copy to), which the operator never takes from a sandbox (a copy is a new file there): it was not applied';
  return undefined;
}
