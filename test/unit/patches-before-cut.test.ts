// Which part of a diff cut at the kept bound git is given (workers/patches-before-cut.ts): the
// patches before the last `diff --git` header, which the cut cannot have shortened. The cut
// falls anywhere (take-diff.ts keeps the first 1 MiB of bytes), in a hunk, in a header line.
import { describe, expect, it } from 'vitest';
import { patchesBeforeCut } from '../../operator/src/workers/patches-before-cut.ts';

const first = 'diff --git a/src/a.js b/src/a.js\n--- a/src/a.js\n+++ b/src/a.js\n@@ -1 +1 @@\n-a\n+b\n';
const bare = '--- a/test/a.test.js\n+++ b/test/a.test.js\n@@ -1 +1 @@\n-t\n+skip\n';
const last = 'diff --git a/src/b.js b/src/b.js\n--- a/src/b.js\n+++ b/src/b.js\n@@ -1,3 +1,3 @@\n-b';

describe('patchesBeforeCut', () => {
  it('keeps every patch before the last header, a traditional ---/+++ one included, and drops the cut one', () => {
    expect(patchesBeforeCut(first + bare + last)).toBe(first + bare);
  });

  it('drops a header line the cut ended once it reads `diff `, keeping the whole patch before it', () => {
    expect(patchesBeforeCut(`${first}diff --g`)).toBe(first);
    expect(patchesBeforeCut(`${first}diff `)).toBe(first);
  });

  it('leaves nothing for git when the cut falls in the first patch', () => {
    expect(patchesBeforeCut(last)).toBe('');
    expect(patchesBeforeCut('diff --gi')).toBe('');
  });

  it('gives git all of a text with no `diff --git` header, which it then judges (and refuses when cut)', () => {
    expect(patchesBeforeCut(bare)).toBe(bare);
  });
});
