// Where git's lists of a cut diff stop (protected-change-check.ts). take-diff.ts keeps the first
// LIMITS.fullDiff bytes of a longer change, cut wherever they end: in a hunk, a header, a line of
// a binary patch. git refuses such a last patch as corrupt, and then read none of the diff, so
// only its `diff --git` headers were judged (a traditional ---/+++ patch before the cut, which
// git reads and no header names, went unseen). Every patch before the last `diff --git` line is
// whole, so git is given those. Pure.

const HEADER = 'diff --git ';
/** `diff `: a cut header line that far is a header; no line of a binary patch holds a space (base85). */
const HEADER_SEEN = 'diff '.length;

/**
 * The text of `cut` before its last patch, which the cut may have ended early: up to the last
 * line starting `diff --git ` (or the unterminated last line, when it is such a line cut short).
 * '' when the cut falls in the first patch; all of `cut` when no line is a `diff --git` header
 * (nothing there is known to be whole, and git judges it).
 */
export function patchesBeforeCut(cut: string): string {
  const lastLine = cut.lastIndexOf('\n') + 1;
  const tail = cut.slice(lastLine);
  if (tail.length >= HEADER_SEEN && tail.length < HEADER.length && HEADER.startsWith(tail)) return cut.slice(0, lastLine);
  const header = cut.lastIndexOf(`\n${HEADER}`);
  if (header >= 0) return cut.slice(0, header + 1);
  return cut.startsWith(HEADER) ? '' : cut;
}
