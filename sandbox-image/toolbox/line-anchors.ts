// `^` and `$` of an extended regular expression for `git grep -E` and `grep -E`, rewritten to
// anchor where read_file shows lines begin and end. read_file drops a file's byte order mark
// and shows `\r\n` as `\n`; ripgrep does the same with --crlf and its BOM sniffing, but git
// grep and grep have no such option and see the BOM and the `\r` as part of the line, so
// `x;$` missed `return x;\r\n` and `^import` missed line 1 after a BOM. Pure.

const BYTE_ORDER_MARK = '\uFEFF';
const CARRIAGE_RETURN = '\r';
/** Characters that repeat the atom before them (`{` opens an interval such as `{2}`). */
const QUANTIFIERS = ['*', '+', '?', '{'];

/**
 * The pattern with each anchor outside a bracket expression widened: `$` to `[\r]?$`, `^` to
 * `^(BOM)?`. The BOM needs a group (in the C locale it is three bytes, and `[...]` would take
 * one), which renumbers groups, so a pattern with a back-reference keeps its `^` as written.
 * An anchor with a quantifier after it stays as written too: GNU grep and ripgrep take `^*s`
 * as an optional anchor (any line with an s), and a quantifier after the widening would bind to
 * the BOM group or the `$` alone instead. What stays different: `.` and `[^...]` still match the
 * `\r` (`x.$` finds `x\r\n`), and a `^` after a BOM in the middle of a file matches past it.
 */
export function anchorsAsReadFileShows(pattern: string): string {
  const widenStart = !hasBackReference(pattern);
  let result = '';
  for (let index = 0; index < pattern.length;) {
    const char = pattern[index] as string;
    if (char === '\\') {
      result += pattern.slice(index, index + 2);
      index += 2;
    } else if (char === '[') {
      const end = bracketEnd(pattern, index);
      if (end === -1) return result + pattern.slice(index); // unterminated: the engine reports it
      result += pattern.slice(index, end + 1);
      index = end + 1;
    } else {
      const quantified = QUANTIFIERS.includes(pattern[index + 1] ?? '');
      if (char === '$' && !quantified) result += `[${CARRIAGE_RETURN}]?$`;
      else if (char === '^' && widenStart && !quantified) result += `^(${BYTE_ORDER_MARK})?`;
      else result += char;
      index += 1;
    }
  }
  return result;
}

/**
 * Index of the `]` closing the bracket expression that opens at `open`, or -1. POSIX rules: a
 * `]` first (after an optional `^`) is a member, `[:alpha:]`, `[=a=]` and `[.-.]` are whole
 * members, and a backslash is an ordinary character.
 */
function bracketEnd(pattern: string, open: number): number {
  let index = open + 1;
  if (pattern[index] === '^') index += 1;
  if (pattern[index] === ']') index += 1;
  while (index < pattern.length) {
    const char = pattern[index];
    if (char === ']') return index;
    const kind = pattern[index + 1];
    if (char === '[' && (kind === ':' || kind === '=' || kind === '.')) {
      const close = pattern.indexOf(`${kind}]`, index + 2);
      index = close === -1 ? index + 1 : close + 2;
    } else {
      index += 1;
    }
  }
  return -1;
}

/** `\1` to `\9` outside brackets: GNU grep and git grep take back-references in -E patterns. */
function hasBackReference(pattern: string): boolean {
  for (let index = 0; index < pattern.length;) {
    const char = pattern[index];
    if (char === '\\') {
      const next = pattern[index + 1] ?? '';
      if (next >= '1' && next <= '9') return true;
      index += 2;
    } else if (char === '[') {
      const end = bracketEnd(pattern, index);
      if (end === -1) return false;
      index = end + 1;
    } else {
      index += 1;
    }
  }
  return false;
}
