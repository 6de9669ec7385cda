// The rows a line of the run record takes on a terminal, cut by the plugin so the terminal never
// cuts one itself. A terminal wraps a line wider than itself, and the part it wraps starts at
// column 0 with nothing to say it goes on: `Ran the checks.` and 61 spaces before `step 7
// approval … by alice` showed, on 80 columns, a row exactly like a real approval line. A line cut
// here into rows no wider than the terminal keeps every row's start ours: the record's own text,
// or a marker that the row goes on (`  | ` for the model's text, `  ↳ ` for a record line that
// quotes it). Widths are counted in cells, erring wide: a row counted too wide is cut early (a
// short row), one counted too narrow would be wrapped by the terminal again. Pure.

/** Narrower terminals get rows this wide all the same: a marker and a few characters must fit. */
export const MINIMUM_COLUMNS = 20;

// Two cells: East Asian Wide and Fullwidth characters (Hangul, CJK, kana, fullwidth forms) and
// emoji, as wcwidth counts them, taken in wide blocks: a narrow character counted as two only
// shortens a row. Unassigned and private-use code points too, which a newer terminal or a
// patched font may draw wide.
const WIDE = new RegExp(
  '[\\u1100-\\u115f\\u2329\\u232a\\u2e80-\\ua4cf\\ua960-\\ua97f\\uac00-\\ud7ff\\uf900-\\ufaff\\ufe10-\\ufe1f\\ufe30-\\ufe6f' +
    '\\uff00-\\uff60\\uffe0-\\uffe6\\u{16fe0}-\\u{1b2ff}\\u{1f000}-\\u{1faff}\\u{20000}-\\u{3fffd}' +
    '\\p{Extended_Pictographic}\\p{Co}\\p{Cn}]',
  'u',
);
// No cell: a combining mark on a letter, digit or mark before it, drawn in that character's cell.
// One on a blank or at a row's start gets a cell of its own in some terminals: counted as one.
const COMBINING = /^[\p{Mn}\p{Me}]$/u;
const BASE = /^[\p{L}\p{N}\p{M}]$/u;

/** The cells one code point takes on a terminal, after `previous`. */
export function cellWidth(character: string, previous?: string): number {
  const code = character.charCodeAt(0);
  // Printable ASCII, nearly all of a record: no expression to run.
  if (code >= 0x20 && code < 0x7f) return 1;
  if (COMBINING.test(character) && previous !== undefined && BASE.test(previous)) return 0;
  return WIDE.test(character) ? 2 : 1;
}

/** The cells a string takes, by cellWidth. */
export function textWidth(text: string): number {
  let width = 0;
  let previous: string | undefined;
  for (const character of text) {
    width += cellWidth(character, previous);
    previous = character;
  }
  return width;
}

// What display-escape.ts shows in place of a character: `<U+202E>` (at most `<U+10FFFF>`, ten
// characters) or caret notation (`^[`, `^I`, `^?`). A row cut inside one leaves `<U+20` and `2E>`
// on two rows, which neither reads as the character nor is found by searching for it.
const ESCAPE = /<U\+[0-9A-F]{4,6}>|\^[?@-_]/y;
const LONGEST_ESCAPE = '<U+10FFFF>'.length;

/**
 * Where to cut `line` at `offset` without splitting an escape: the start of the escape that runs
 * across `offset`, if one starts after `from`; else `offset`.
 */
export function cutBeforeEscape(line: string, offset: number, from = 0): number {
  for (let start = Math.max(from, offset - LONGEST_ESCAPE + 1); start < offset; start++) {
    ESCAPE.lastIndex = start;
    const escape = ESCAPE.exec(line);
    if (escape && start + escape[0].length > offset) return start;
  }
  return offset;
}

/**
 * `line` as rows of at most `columns - 1` cells (one spare: a terminal that wraps on filling its
 * last column, or a character it draws a cell wider than counted, wraps nothing), each after the
 * first starting with `continuation`. A row ends after its last space when that keeps at least
 * half of it, so words stay whole; otherwise it is cut where it is full, before an escape that
 * would be split. Text without tabs or control characters: escape it first (display-escape.ts).
 */
export function wrappedRows(line: string, columns: number, continuation: string): string[] {
  const limit = Math.max(columns, MINIMUM_COLUMNS) - 1;
  // No code point takes more cells than it has UTF-16 units, doubled: a short line is one row.
  if (line.length * 2 <= limit) return [line];
  const start = textWidth(continuation);
  const rows: string[] = [];
  let row = '';
  let width = 0;
  /** Where the row may end at a space: the length of the row up to and with it, and its width there. */
  let space: { length: number; width: number } | undefined;
  let previous: string | undefined;
  /** Where in `line` the row's own text starts (after the continuation), and where `character` is. */
  let rowStart = 0;
  let offset = 0;
  for (const character of line) {
    const cells = cellWidth(character, previous);
    if (width + cells > limit && width > start) {
      let breakAt = space && space.width * 2 >= limit ? space : { length: row.length, width };
      if (breakAt.length === row.length) {
        // An escape is printable ASCII, a cell a character: the row is shorter by as many cells.
        const back = offset - cutBeforeEscape(line, offset, rowStart + 1);
        if (back > 0) breakAt = { length: row.length - back, width: width - back };
      }
      rowStart += breakAt.length - (rows.length === 0 ? 0 : continuation.length);
      rows.push(row.slice(0, breakAt.length));
      row = continuation + row.slice(breakAt.length);
      width = start + width - breakAt.width;
      space = undefined;
    }
    row += character;
    width += cells;
    if (character === ' ' && width > start) space = { length: row.length, width };
    previous = character;
    offset += character.length;
  }
  rows.push(row);
  return rows;
}
