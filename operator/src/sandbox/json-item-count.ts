// How many objects, arrays and members a JSON text holds, counted without parsing it. A
// toolbox line is written by whatever runs in the sandbox (the model's code can write a whole
// line into the toolbox's stdout), and JSON.parse turns an 8 MiB line of `[{},{},…]` into
// ~180 MiB of heap, or of `{"a":0,"b":0,…}` into ~100 MiB: either kills an operator with a
// 160 MiB heap. Counting first bounds what a parse can allocate, whatever the line says.

/**
 * More items than any answer of the contract holds, by an order of magnitude: the largest are
 * list_files and glob at LIST_MAX_RESULTS (5 000) paths, ~5 000 items, then grep at
 * SEARCH_MAX_RESULTS (500) matches of three fields, ~2 000 (contract/limits.ts,
 * test/unit/json-item-count.test.ts). At this bound a parse holds a few MiB beside the line.
 */
export const RESPONSE_MAX_JSON_ITEMS = 65_536;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const COMMA = 0x2c;

/**
 * Counts the `{`, `[` and `,` outside JSON strings: every object and array, and every member
 * or element after the first of each, so a long list with no nesting counts too. Stops once
 * the count passes `stopAbove`, so a hostile line costs no more than the bound. Validates
 * nothing: a text that is not JSON is JSON.parse's to refuse.
 */
export function countJsonItems(text: string, stopAbove = Number.POSITIVE_INFINITY): number {
  let items = 0;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (code === QUOTE) at = closingQuote(text, at + 1);
    else if ((code === OPEN_BRACE || code === OPEN_BRACKET || code === COMMA) && ++items > stopAbove) return items;
  }
  return items;
}

/** Where the string whose content starts at `from` ends: the first quote after an even run of backslashes. */
function closingQuote(text: string, from: number): number {
  for (let at = text.indexOf('"', from); at !== -1; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    // The opening quote stops the walk back, so it never leaves the string.
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return text.length;
}

/**
 * countJsonItems over a text that comes in chunks of UTF-8 bytes (a model endpoint's answer as
 * it downloads): the same count, carried across chunks (a string, or an escape, may span two).
 * The quote, the backslash and the counted characters are ASCII, and no byte of a multi-byte
 * UTF-8 character is ASCII, so counting bytes counts the text's characters.
 */
export class JsonItemTally {
  private inString = false;
  private escaped = false;
  /** The items counted so far. */
  items = 0;

  push(chunk: Uint8Array): number {
    for (const byte of chunk) {
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (byte === BACKSLASH) this.escaped = true;
        else if (byte === QUOTE) this.inString = false;
      } else if (byte === QUOTE) this.inString = true;
      else if (byte === OPEN_BRACE || byte === OPEN_BRACKET || byte === COMMA) this.items++;
    }
    return this.items;
  }
}
