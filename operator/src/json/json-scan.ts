// What a JSON text's structure holds, read without parsing it: how many objects, arrays and
// members it has, and how deep its objects and arrays nest. Both bound what a parse, or a
// recursive copy after it, would do with text someone else wrote: a toolbox line the model's
// code can forge (sandbox/response-lines.ts), a model endpoint's answer as it downloads
// (providers/limit-response-size.ts), a tool call's arguments (providers/answer-bounds.ts).
// One pass, no recursion, and the inside of strings is skipped whole.

/**
 * More items than any answer of the contract holds, by an order of magnitude: the largest are
 * list_files and glob at LIST_MAX_RESULTS (5 000) paths, ~5 000 items, then grep at
 * SEARCH_MAX_RESULTS (500) matches of three fields, ~2 000 (contract/limits.ts,
 * test/unit/json-scan.test.ts). JSON.parse turns an 8 MiB line of `[{},{},…]` into ~180 MiB of
 * heap, or of `{"a":0,"b":0,…}` into ~100 MiB; at this bound a parse holds a few MiB beside
 * the line.
 */
export const RESPONSE_MAX_JSON_ITEMS = 65_536;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
// `[` (0x5b) and `{` (0x7b), `]` (0x5d) and `}` (0x7d) differ only in bit 0x20, and no other
// character sets it to the same: one comparison of `code | 0x20` tells each pair.
const CASE_BIT = 0x20;
const OPENING = 0x7b;
const CLOSING = 0x7d;

/**
 * A scan of a JSON text that may come in pieces (a string may begin in one and end in the
 * next, an escape too). Counts the `{`, `[` and `,` outside strings (`items`: every object
 * and array, and every member or element after the first of each, so a long list with no
 * nesting counts too) and how deep the brackets nest (`deepest`; `{}` is one). Validates
 * nothing: a text that is not JSON gets figures too, and is JSON.parse's to refuse.
 */
export class JsonScan {
  /** The `{`, `[` and `,` outside strings seen so far. */
  items = 0;
  /** The deepest nesting of objects and arrays seen so far. */
  deepest = 0;
  private depth = 0;
  private inString = false;
  /** The piece before ended on a backslash inside a string: the next character is escaped. */
  private escaped = false;
  private readonly stopAbove: number;

  /** `stopAbove`: once `items` passes it the scan stops, so a hostile text costs no more than the bound. */
  constructor(stopAbove = Number.POSITIVE_INFINITY) {
    this.stopAbove = stopAbove;
  }

  /** Scans the next piece of the text; returns `items` so far. */
  text(piece: string): number {
    const stopAbove = this.stopAbove;
    let items = this.items;
    if (items > stopAbove || piece.length === 0) return items;
    let depth = this.depth;
    let deepest = this.deepest;
    let at = 0;
    if (this.inString) {
      const from = this.escaped ? 1 : 0;
      at = continuedStringEnd(piece, from);
      if (at === piece.length) {
        this.escaped = endsInEscape(piece, from);
        return items;
      }
      this.inString = false;
      this.escaped = false;
      at += 1;
    }
    for (; at < piece.length; at++) {
      const code = piece.charCodeAt(at);
      if (code === QUOTE) at = closingQuote(piece, at + 1);
      else if (code === COMMA) {
        if (++items > stopAbove) break;
      } else if ((code | CASE_BIT) === OPENING) {
        if (++depth > deepest) deepest = depth;
        if (++items > stopAbove) break;
      } else if ((code | CASE_BIT) === CLOSING) {
        depth--;
      }
    }
    // Past the end: closingQuote found no end, the string goes on into the next piece.
    if (at > piece.length) {
      this.inString = true;
      this.escaped = endsInEscape(piece, 0);
    }
    this.items = items;
    this.depth = depth;
    this.deepest = deepest;
    return items;
  }

  /**
   * Scans the next chunk of the text as UTF-8 bytes (a model endpoint's answer as it
   * downloads); returns `items` so far. Read as Latin-1, each byte is one character: the
   * quote, the backslash and the brackets are ASCII and no byte of a multi-byte UTF-8
   * character is, so the scan sees the same structure, and a character cut between two chunks
   * cannot hide one.
   */
  bytes(chunk: Uint8Array): number {
    return this.text(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('latin1'));
  }
}

/**
 * Where the string whose content starts at `from` ends: the first quote after an even run of
 * backslashes; the text's length when it goes on past it. The opening quote stops the walk
 * back, so it never leaves the string.
 */
export function closingQuote(text: string, from: number): number {
  for (let at = text.indexOf('"', from); at !== -1; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return text.length;
}

/**
 * closingQuote for a string the piece before left open, its content here starting at `from`
 * (1 when the piece before ended inside an escape, whose escaped character, a backslash
 * perhaps, is this piece's first): the walk back stops at `from`. Apart from closingQuote
 * because, with this bound in it, V8 compiled the hot loop's walk back worse: a scan of an
 * 8 MiB toolbox line of code took 7.1 ms instead of 4.7 once byte chunks had been scanned too.
 */
function continuedStringEnd(text: string, from: number): number {
  for (let at = text.indexOf('"', from); at !== -1; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (at - backslashes > from && text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return text.length;
}

/** Whether a piece ends on an odd run of backslashes, counted back no further than `from`: the next piece's first character is escaped. */
function endsInEscape(text: string, from: number): boolean {
  let backslashes = 0;
  while (text.length - backslashes > from && text.charCodeAt(text.length - 1 - backslashes) === BACKSLASH) backslashes++;
  return backslashes % 2 === 1;
}

/** The `{`, `[` and `,` outside strings of a whole text (JsonScan), given up once past `stopAbove`. */
export function countJsonItems(text: string, stopAbove = Number.POSITIVE_INFINITY): number {
  return new JsonScan(stopAbove).text(text);
}

/**
 * How deep objects and arrays nest in a whole JSON text (JsonScan): the point is text a
 * recursive reader cannot take. Text that is not JSON gets a depth too, which only decides
 * whether it is read.
 */
export function jsonNestingDepth(text: string): number {
  const scan = new JsonScan();
  scan.text(text);
  return scan.deepest;
}
