// How many bytes text and values take in the JSON the API server stores, which is what etcd's
// request limit (1.5 MiB by default) is counted against. The API server decodes what the
// operator sends and writes the object again with Go's encoding/json, which escapes more than
// JSON.stringify does and far more than Buffer.byteLength counts: `<`, `>`, `&`, U+2028 and
// U+2029 take six bytes (`\u003c`), a control character six (`\u0001`) but \n, \r and \t two,
// `"` and `\` two. A 64 KiB diff of `<` measured in UTF-8 was 384 KiB stored, and what a model
// wrote pushed a run near its bound past etcd's limit: the write was refused and the run never
// got its phase. A lone surrogate is not text: it is stored as U+FFFD, three bytes (as
// Buffer.byteLength counts it too). \b and \f count six, not two: Go before 1.22 wrote them as
// \u0008 and \u000c, and a bound must hold whichever API server stores the run. Pure.

/** Stored bytes of each ASCII character inside a string. */
const ASCII_BYTES = Uint8Array.from({ length: 128 }, (_, code) => {
  if (code === 0x0a || code === 0x0d || code === 0x09) return 2;
  if (code < 0x20) return 6;
  if (code === 0x22 || code === 0x5c) return 2;
  if (code === 0x3c || code === 0x3e || code === 0x26) return 6;
  return 1;
});

/** Stored bytes of the character that is not ASCII at `index` of `text`, and its code units (two for a surrogate pair). */
function nonAsciiAt(text: string, index: number): { bytes: number; units: number } {
  const code = text.charCodeAt(index);
  if (code < 0x800) return { bytes: 2, units: 1 };
  if (code >= 0xd800 && code <= 0xdbff) {
    const next = text.charCodeAt(index + 1);
    return next >= 0xdc00 && next <= 0xdfff ? { bytes: 4, units: 2 } : { bytes: 3, units: 1 };
  }
  return { bytes: code === 0x2028 || code === 0x2029 ? 6 : 3, units: 1 };
}

/**
 * The longest beginning of `text` that takes at most `limit` stored bytes inside a JSON string
 * (quotes not counted): its length in code units (never between the halves of a surrogate
 * pair) and its stored bytes. Reads no further than the cut: every code unit takes at least one
 * byte, so a 1 MiB text cut at 64 KiB costs 64 Ki steps.
 */
export function storedTextPrefix(text: string, limit: number): { end: number; bytes: number } {
  let bytes = 0;
  let index = 0;
  while (index < text.length) {
    const code = text.charCodeAt(index);
    // ASCII, nearly all of a diff, without an object per character.
    if (code < 0x80) {
      const size = ASCII_BYTES[code] ?? 6;
      if (bytes + size > limit) break;
      bytes += size;
      index += 1;
      continue;
    }
    const character = nonAsciiAt(text, index);
    if (bytes + character.bytes > limit) break;
    bytes += character.bytes;
    index += character.units;
  }
  return { end: index, bytes };
}

// In JSON.stringify's output, what Go writes in another size: `<`, `>`, `&`, U+2028, U+2029, and
// the escapes \b, \f and \uXXXX. Only strings hold a backslash, and only as the start of an
// escape, so escapes are read in order: `\\` is matched whole, lest the `b` of `\\b` be read as
// an escape. Escapes of the same size in both (\n, \") are not matched: most JSON has many.
const RESIZED = /[<>&\u2028\u2029]|\\[\\bfu]/g;

/**
 * Stored bytes of `value` as JSON (what JSON.stringify writes of it, as Go writes it again):
 * the UTF-8 size of JSON.stringify's output, corrected where Go writes otherwise. Structure,
 * numbers, true, false and null take the same bytes in both; key order does not change a size.
 */
export function storedJsonBytes(value: unknown): number {
  const json = JSON.stringify(value) as string | undefined;
  if (json === undefined) return 0;
  let bytes = Buffer.byteLength(json, 'utf8');
  RESIZED.lastIndex = 0;
  for (let match = RESIZED.exec(json); match !== null; match = RESIZED.exec(json)) {
    const code = json.charCodeAt(match.index);
    if (code === 0x3c || code === 0x3e || code === 0x26) bytes += 5;
    else if (code === 0x2028 || code === 0x2029) bytes += 3;
    else if (match[0] === '\\b' || match[0] === '\\f') bytes += 4;
    // \ud800 as JSON.stringify escapes a lone surrogate: stored as U+FFFD, 3 bytes, not 6. Other
    // \u escapes are control characters, six bytes in both.
    else if (match[0] === '\\u' && /^[dD][89a-fA-F]/.test(json.slice(match.index + 2, match.index + 4))) bytes -= 3;
  }
  return bytes;
}

/** Stored bytes of `text` inside a JSON string, its quotes not counted. */
export function storedTextBytes(text: string): number {
  // JSON.stringify and Buffer.byteLength are native: several times faster than storedTextPrefix's loop.
  return storedJsonBytes(text) - 2;
}
