// Whether a diff holds a binary patch. take-diff.ts runs `git diff` without --binary, so a diff
// the operator took never does ("Binary files a/x and b/x differ" stands for such a file). The
// text comes from the sandbox, though, where code can change what git prints; and a binary
// patch is compressed: a hand-made 131 KB one wrote a 100 MiB file under `git apply`, so a
// 1 MiB diff could fill the worker's disk and memory. The workers apply no diff that has one.
// Pure.

const BINARY_PATCH = /^GIT binary patch$/m;

export const holdsBinaryPatch = (diff: string): boolean => BINARY_PATCH.test(diff);

export const BINARY_PATCH_REFUSAL =
  'the diff holds a binary patch, which the operator never takes from a sandbox (it keeps text changes only): it was not applied';
