// Regular expressions that two engines must read alike: the operator's (JavaScript, through zod)
// and the API server's (Go's RE2, for a CRD `pattern`), since the CRD's patterns are zod's.
//
// - `\s` is not read alike: RE2 takes it as [\t\n\f\r ], JavaScript also as \v, U+00A0 and the
//   other Unicode spaces, so a URL ending in a no-break space passed `kubectl apply` and then
//   failed in the operator. WHITESPACE_CHARACTERS spells JavaScript's `\s` out (a unit test
//   compares every UTF-16 code unit).
// - `\uXXXX` is JavaScript's alone (RE2 writes `\x{XXXX}`), and a RegExp's source spells U+2028
//   and U+2029 that way even when written raw: re2Pattern rewrites it for the CRD.

/** The body of a character class matching exactly what JavaScript's `\s` matches. */
export const WHITESPACE_CHARACTERS = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

/** One character that is not whitespace: `\S`, spelt out. */
export const NOT_WHITESPACE = `[^${WHITESPACE_CHARACTERS}]`;

/**
 * A JavaScript pattern as RE2 reads the same: each `\uXXXX` escape becomes `\x{XXXX}` (an
 * escaped backslash before a `u` is left alone). The other escapes the spec's patterns use
 * (\t \n \v \f \r, \d, \w, \/, \. and the like) mean the same in both.
 */
export function re2Pattern(pattern: string): string {
  return pattern.replace(/(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})/g, '$1\\x{$2}');
}
