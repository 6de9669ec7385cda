// Which characters a person cannot see for what they are, and how they are spelled when shown
// instead: written once for the operator's messages (reconcile/short-field.ts) and the kubectl
// plugin's terminal output (cli/display-escape.ts). Two lists had drifted apart (the operator's
// missed the braille blank), and one of them had earlier missed U+180B, which a command hid
// between blanks. What each caller does around them (keeping newlines, joiners between letters,
// counting runs of blanks, cutting a field) is its own policy and stays with it. Pure.

/**
 * A hidden character, as the source of a regular expression character class (for the `u` flag):
 * - C0 controls, DEL and C1 controls, which a terminal obeys (ESC starts a sequence that erases
 *   a line, U+009B is an 8-bit CSI);
 * - every format character (\p{Cf}: bidi embeddings, overrides and isolates, LRM/RLM, the Arabic
 *   letter mark, the zero-width space and joiners, the BOM, the soft hyphen, invisible
 *   operators, tag characters), which reorders text or shows as nothing;
 * - line and paragraph separators (U+2028, U+2029), which end a line in some readers;
 * - every default-ignorable code point (\p{Default_Ignorable_Code_Point}: what a renderer shows
 *   as nothing when it has no glyph): Hangul fillers (U+3164 is a valid JavaScript identifier,
 *   so `exec(ㅤ)` reads as `exec( )`), Khmer inherent vowels, the Mongolian free variation
 *   selectors, the combining grapheme joiner, variation selectors, reserved ignorables;
 * - the braille blank (U+2800), a letter to every program and a blank to every eye, and two more
 *   that are neither format characters nor default-ignorable yet draw nothing: the musical null
 *   notehead (U+1D159, a symbol) and the Khitan small script filler (U+16FE4); 850 times 15
 *   spaces and a U+1D159 hid `curl … | sh #` as U+180B had.
 * Joiners (U+200C, U+200D) are hidden too; a caller that must keep them where a script or an
 * emoji needs them (cli/display-escape.ts) says so itself.
 */
export const HIDDEN_CHARACTER =
  '[\\u0000-\\u001f\\u007f-\\u009f\\p{Cf}\\p{Default_Ignorable_Code_Point}\\u2028\\u2029\\u2800\\u{16FE4}\\u{1D159}]';

/** `U+XXXX`, at least four hex digits, upper case: U+202E, U+E0041. */
export const codePointName = (character: string): string => `U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * How a character is shown in place of itself: C0 controls and DEL in caret notation as
 * `cat -v` spells them (a newline as ^J, ESC as ^[, DEL as ^?), which a reader of logs knows,
 * and every other character as <U+XXXX> (<U+202E>, <U+00A0>). The spelling is made of printable
 * ASCII only, so it cannot itself be obeyed or hidden.
 */
export function spelledCharacter(character: string): string {
  const code = character.codePointAt(0)!;
  if (code < 0x20) return `^${String.fromCharCode(code + 0x40)}`;
  if (code === 0x7f) return '^?';
  return `<${codePointName(character)}>`;
}
