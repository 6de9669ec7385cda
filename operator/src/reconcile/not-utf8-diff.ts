// A run's change whose bytes are not UTF-8 text. git prints a file in another encoding
// (Latin-1, Shift-JIS, Windows-1252) as its raw bytes; the operator keeps a diff as UTF-8 text
// (the diff ConfigMap, status.result, diffSha256), where each such byte becomes U+FFFD. That
// text is not the change: applied by publish or continueFrom, an edited file no longer
// matches (the run fails) and a new file is written with other bytes (silently). Such a diff
// is kept for reading, marked (status.result.diffNotUtf8), and never applied. Pure.

/**
 * Whether a diff's bytes are UTF-8 text. cut: they stop where take-diff cut the diff (1 MiB),
 * which may split a character: the decoder then keeps an unfinished last one for more input
 * (stream) instead of counting it as invalid; the cut itself is said by `truncated`.
 */
export function isUtf8Diff(bytes: Uint8Array, cut: boolean): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: cut });
    return true;
  } catch {
    return false;
  }
}

/** Why a diff marked not UTF-8 is not published or continued from (`outcome`), and what to do. */
export const notUtf8DiffMessage = (outcome: string) =>
  'the change holds bytes that are not UTF-8 text (a file in another encoding, shown as U+FFFD in its diff); ' +
  `the operator keeps diffs as UTF-8 text, so ${outcome}: convert the file to UTF-8 in the repository, or make this change without the operator`;
