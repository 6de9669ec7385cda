// Model-controlled text (a diff, a tool call's input, a summary, an Event message) shown to a
// person. A terminal obeys control characters: ESC[2K erases the line just printed, an OSC
// sequence sets the window title or a hyperlink, a carriage return or backspaces overwrite
// what came before, and a bidi override (U+202E) shows bytes in another order than they run.
// So what a human reads must show those characters instead of obeying them: C0 controls and
// DEL in caret notation as `cat -v` does (ESC is ^[), C1 controls and invisible or
// reordering Unicode as <U+XXXX>. Newlines and tabs stay in multi-line text; a CR right
// before a newline (CRLF files) is harmless and kept. Pure; every place that prints model
// text goes through here (TerminalText at the CLI's edges, the local approval prompt).

export type EscapeMode =
  /** Keeps \n and \t (and \r before \n): for diffs and inputs shown whole. */
  | 'lines'
  /** Escapes every control character, newlines included: for one-line fields. */
  | 'inline';

export interface EscapedText {
  text: string;
  /** How many characters were shown escaped; 0 when the text is printed as it is. */
  escaped: number;
}

// C0 controls, DEL, C1 controls; then Unicode that reorders or hides text: every format
// character (\p{Cf}: the Arabic letter mark, zero-width space, LRM/RLM, the bidi embeddings,
// overrides and isolates, the BOM, the soft hyphen, invisible operators, tag characters), line
// and paragraph separators, and the characters that render as blank or nothing but are not
// spaces: the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0; U+3164 is a valid JavaScript
// identifier, so `exec(ㅤ)` reads as `exec( )`), the braille blank (U+2800, a letter to
// every program), the combining grapheme joiner and the variation selectors. Joiners
// (U+200C, U+200D) stay: emoji and several scripts need them. The other spaces (U+00A0,
// U+3000, ...) stay too: French and CJK text is full of them; their long runs are counted.
export const SHOWN_ESCAPED =
  /(?![\u200c\u200d])[\u0000-\u001f\u007f-\u009f\p{Cf}\u2028\u2029\u115f\u1160\u3164\uffa0\u2800\u034f\ufe00-\ufe0f\u{e0100}-\u{e01ef}]/gu;

const codePointName = (character: string) => `U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

function visible(character: string): string {
  const code = character.codePointAt(0)!;
  if (code < 0x20) return `^${String.fromCharCode(code + 0x40)}`;
  if (code === 0x7f) return '^?';
  return `<${codePointName(character)}>`;
}

export function escapeForDisplay(text: string, mode: EscapeMode = 'lines'): EscapedText {
  let escaped = 0;
  const shown = text.replace(SHOWN_ESCAPED, (character, offset: number) => {
    if (mode === 'lines' && (character === '\n' || character === '\t' || (character === '\r' && text[offset + 1] === '\n')))
      return character;
    escaped += 1;
    return visible(character);
  });
  return { text: shown, escaped };
}

/** Blanks this long or longer are shown counted (blankRunsCounted). */
export const BLANK_RUN = 16;
// Every character that shows as blank: tabs, all the spaces (\p{Zs}: U+00A0, U+2000–U+200A,
// U+3000, ...), and the blanks escapeForDisplay shows escaped, whose long runs would otherwise
// fill the screen with thousands of <U+3164> just the same.
const BLANK = '[\\t\\p{Zs}\\u115f\\u1160\\u3164\\uffa0\\u2800]';
const BLANK_RUNS = new RegExp(`${BLANK}{${BLANK_RUN},}`, 'gu');
const PLAIN_BLANK = /[ \t]/u;

/**
 * An approval's input as a person is shown it: every run of BLANK_RUN or more blanks as
 * `<N blanks>`, naming the blanks other than spaces and tabs in it (`<3000 blanks including
 * U+00A0>`: they do not split a shell word as a space does). A command such as `curl … | sh #`
 * followed by thousands of blanks and `npm test` left only `npm test` on the screen above the
 * question. Run it before escapeForDisplay, which would turn U+3164 into text. The approval
 * binds the input's sha256, not what is shown.
 */
export function blankRunsCounted(text: string): { text: string; runs: number } {
  let runs = 0;
  const shown = text.replace(BLANK_RUNS, (run) => {
    runs += 1;
    const blanks = [...run];
    const others = [...new Set(blanks.filter((blank) => !PLAIN_BLANK.test(blank)))].map(codePointName);
    return `<${blanks.length} blanks${others.length > 0 ? ` including ${others.join(', ')}` : ''}>`;
  });
  return { text: shown, runs };
}

export const ESCAPE_WARNING =
  'warning: the output holds control or bidirectional characters; they are shown escaped (ESC as ^[, a bidi override as <U+202E>)';

/**
 * One output stream's view of escaping: with `terminal` (a terminal, or a person's text on
 * its way through a pipe: exact-output.ts), text is escaped and the first escape prints one
 * warning; otherwise the bytes go out exactly, so a redirected diff still applies.
 */
export class TerminalText {
  private warned = false;

  constructor(
    private readonly options: {
      terminal: boolean;
      warn: (line: string) => void;
      /** Added to the warning, e.g. how to get the exact bytes. */
      hint?: string;
    },
  ) {}

  show(text: string, mode: EscapeMode = 'lines'): string {
    if (!this.options.terminal) return text;
    const result = escapeForDisplay(text, mode);
    if (result.escaped > 0 && !this.warned) {
      this.warned = true;
      this.options.warn(`${ESCAPE_WARNING}${this.options.hint ? `; ${this.options.hint}` : ''}`);
    }
    return result.text;
  }
}
