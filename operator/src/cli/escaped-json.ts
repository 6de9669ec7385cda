// JSON for `-o json` outputs whose strings came from a model or a repository. JSON.stringify
// escapes only U+0000–U+001F: DEL, the C1 controls (U+009B is an 8-bit CSI to many terminals),
// bidi overrides and the other characters a terminal obeys or hides go out raw, and `-o json`
// is exact bytes when redirected (exact-output.ts), so `logs -o json | less -R` obeys them.
// Here each character display-escape.ts shows escaped is written as \uXXXX instead: the parsed
// value is the same, and the text holds none of them. Pure.
import { SHOWN_ESCAPED } from './display-escape.ts';

const jsonEscape = (character: string): string =>
  // A character outside the BMP (a tag character) is escaped as its UTF-16 surrogate pair, as JSON spells it.
  Array.from({ length: character.length }, (_, index) => `\\u${character.charCodeAt(index).toString(16).padStart(4, '0')}`).join('');

/** JSON.stringify(value, null, indent), with no character in it a terminal would obey or hide. */
export function escapedJson(value: unknown, indent?: number): string {
  // Every C0 control left in JSON.stringify's text is its own indentation: inside a string it
  // has already been escaped, so only the characters from DEL on are replaced.
  return JSON.stringify(value, null, indent).replace(SHOWN_ESCAPED, (character) =>
    character.charCodeAt(0) < 0x20 ? character : jsonEscape(character),
  );
}
