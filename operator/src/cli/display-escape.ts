// Model-controlled text (a diff, a tool call's input, a summary, an Event message) shown to a
// person. A terminal obeys control characters: ESC[2K erases the line just printed, an OSC
// sequence sets the window title or a hyperlink, a carriage return or backspaces overwrite
// what came before, and a bidi override (U+202E) shows bytes in another order than they run.
// So what a human reads must show those characters instead of obeying them: C0 controls and
// DEL in caret notation as `cat -v` does (ESC is ^[), C1 controls and invisible or
// reordering Unicode as <U+XXXX>. Newlines and tabs stay in multi-line text; a CR right
// before a newline (CRLF files) is harmless and kept. Where a person judges what will run or
// change (an approval's input, a diff) and in one-line summaries, a blank that is not a space
// is shown too: `npm test<U+00A0># ; curl … | sh` looked like `npm test` and a comment, but bash
// splits words only at spaces, tabs and newlines, so it ran the curl. Pure; every place that
// prints model text goes through here (TerminalText at the CLI's edges, the local approval prompt).
import { codePointName, HIDDEN_CHARACTER, spelledCharacter } from '../text/hidden-character.ts';

export type EscapeMode =
  /** Keeps \n and \t (and \r before \n): for prose shown whole (a model's text, a tool's output). */
  | 'lines'
  /** As 'lines', and shows the look-alike blanks and joiners (LOOKALIKE): for approval inputs and diffs. */
  | 'code'
  /** Escapes every control character, newlines included, and shows the look-alikes: for one-line fields and summaries. */
  | 'inline';

export interface EscapedText {
  text: string;
  /** How many characters were shown escaped; 0 when the text is printed as it is. */
  escaped: number;
}

// Every hidden character (text/hidden-character.ts: controls, format characters, separators,
// default-ignorable code points such as U+3164 and U+180B, the braille blank), in every mode,
// but the joiners (U+200C, U+200D): emoji and several scripts need them, so prose keeps them,
// and code and summaries show only those that join nothing (LOOKALIKE). The other spaces
// (U+00A0, U+3000, ...) are not hidden and stay too in prose: French and CJK text is full of
// them; their long runs are counted. Code and summaries show them as well (LOOKALIKE).
export const SHOWN_ESCAPED = new RegExp(`(?![\\u200c\\u200d])${HIDDEN_CHARACTER}`, 'gu');

/**
 * What looks like something it is not where a person reads code, shown in 'code' and 'inline'
 * mode besides SHOWN_ESCAPED: every space character but the space itself (\p{Zs}: U+00A0,
 * U+2000–U+200A, U+202F, U+205F, U+3000, ...; U+FEFF is \p{Cf}, shown everywhere), which
 * prints as a space but splits no shell word; and a run of joiners (U+200C, U+200D) whose
 * neighbours are ASCII or the text's end (joinsNothing). Joiners stay between letters of the
 * scripts and in the emoji that need them; next to ASCII they join nothing any script uses,
 * and only make `cu‍rl` look like `curl`. A whole run is matched and its neighbours looked at
 * once: a look-behind and look-ahead over the run from each joiner in it cost O(n²), and a
 * diff line of 349 000 joiners held `kubectl codingrun diff` for minutes.
 */
const LOOKALIKE = /[^\P{Zs} ]|[\u200c\u200d]+/gu;
const SHOWN_IN_CODE = new RegExp(`${SHOWN_ESCAPED.source}|${LOOKALIKE.source}`, 'gu');
const JOINER = /^[\u200c\u200d]/;
// A UTF-16 unit next to a joiner run: ASCII, or nothing (the text's start or end). A surrogate is not ASCII.
const joinsNothing = (neighbour: string | undefined) => neighbour === undefined || neighbour <= '\u007f';

export function escapeForDisplay(text: string, mode: EscapeMode = 'lines'): EscapedText {
  let escaped = 0;
  const shown = text.replace(mode === 'lines' ? SHOWN_ESCAPED : SHOWN_IN_CODE, (character: string, offset: number) => {
    // A run of joiners (only 'code' and 'inline' match one): all of it shown, or all kept. Joiners are in the BMP.
    if (JOINER.test(character)) {
      if (!joinsNothing(text[offset - 1]) || !joinsNothing(text[offset + character.length])) return character;
      escaped += character.length;
      return [...character].map(spelledCharacter).join('');
    }
    if (mode !== 'inline' && (character === '\n' || character === '\t' || (character === '\r' && text[offset + 1] === '\n')))
      return character;
    escaped += 1;
    return spelledCharacter(character);
  });
  return { text: shown, escaped };
}

/**
 * A string from an object anyone in the namespace may edit (an ownerReference, a chunk's
 * entry), as a part of a message: on one line, escaped, and at most `max` characters, so it
 * can neither start a line of its own (a refusal that printed a well-formed diff) nor push the
 * message's advice off the screen.
 */
export function quotedInline(text: string, max = 200): string {
  const shown = escapeForDisplay(text, 'inline').text;
  return shown.length <= max ? shown : `${shown.slice(0, max)}… (${shown.length - max} more characters)`;
}

/**
 * For a one-line summary: runs of the blanks a shell splits words at (space, tab, newline, CR)
 * as one space, none at either end. Other blanks are left to be shown (\s and trim() took
 * U+00A0 and U+FEFF too).
 */
export const collapsedBlanks = (text: string): string => text.replace(/[ \t\r\n]+/g, ' ').replace(/^ | $/g, '');

/** Blanks this long or longer are shown counted (blankRunsCounted). */
export const BLANK_RUN = 16;
// Every character that shows as blank: tabs, all the spaces (\p{Zs}: U+00A0, U+2000–U+200A,
// U+3000, ...), and the blanks escapeForDisplay shows escaped, whose long runs would otherwise
// fill the screen with thousands of <U+3164> just the same.
// U+1D159 and U+16FE4 draw nothing too (text/hidden-character.ts).
const BLANK = '[\\t\\p{Zs}\\u115f\\u1160\\u3164\\uffa0\\u2800\\u{16FE4}\\u{1D159}]';
// What shows as nothing (format characters, default-ignorable code points) and is not a
// blank itself: a run goes on across it. 850 times 15 spaces and a U+180B held no run of 16
// blanks, so none was counted and 12 750 blanks pushed `curl … | sh #` off the screen. Kept
// apart from BLANK (the Hangul fillers are both), so that a run is read one way only.
const INVISIBLE = `(?:(?!${BLANK})[\\p{Cf}\\p{Default_Ignorable_Code_Point}])`;
const IS_BLANK = new RegExp(`^${BLANK}$`, 'u');
/** Blank lines this many or more in a row are shown counted (blankRunsCounted). */
export const BLANK_LINE_RUN = 3;
// A line that shows as nothing: blanks, what shows as nothing, a CR (a CRLF file's line end).
const IS_BLANK_LINE = new RegExp(`^(?:${BLANK}|${INVISIBLE}|\\r)*$`, 'u');
const PLAIN_BLANK = /[ \t]/u;
const NAMED_KINDS = 8;

/**
 * Runs of blanks a few characters apart are one stretch (blankRunsCounted), whatever those
 * characters are: a run broke at any character but those that show as nothing, and 1000 times
 * 15 spaces and a combining acute accent (U+0301), or a '.', held no run of 16 blanks and
 * scrolled `curl … | sh #` off the screen. Two runs are of one stretch when at most STRETCH_GAP
 * characters lie between them, none a blank or a line break (a real one, or JSON's `\n`: the
 * rows of a table written to a file stay apart), and each run has STRETCH_RUN_RATIO blanks or more for
 * every one of those characters; so a stretch is three quarters blank or more, and words one
 * space apart (`a b c`) or a table's cells (`| 1            | 2 |`: one blank after each bar)
 * are none. A stretch of STRETCH_BLANKS blanks or more is counted as one run is.
 */
export const STRETCH_GAP = 3;
export const STRETCH_RUN_RATIO = 3;
/** Twice BLANK_RUN: an aligned table's row stays as written, a screen's width of blanks does not. */
export const STRETCH_BLANKS = 2 * BLANK_RUN;
// A run of blanks: a blank, then blanks and characters that show as nothing. Only runs of
// STRETCH_RUN_RATIO blanks or more can be of a stretch, and only longer ones are counted alone:
// the shorter ones, a space between two words, are left to the gaps (and break a stretch
// there), so that prose a megabyte long is not taken apart a word at a time.
const BLANK_RUN_PATTERN = new RegExp(`(?:${BLANK}${INVISIBLE}*){${STRETCH_RUN_RATIO},}`, 'gu');
const BREAKS_STRETCH = new RegExp(`[\\n\\r]|\\\\[nr]|${BLANK}`, 'u');

interface BlankRun {
  start: number;
  end: number;
  blanks: number;
}

/** The runs of blanks in text, grouped into stretches. O(n): a diff can be megabytes. */
function blankStretches(text: string): BlankRun[][] {
  const stretches: BlankRun[][] = [];
  let current: BlankRun[] = [];
  for (const match of text.matchAll(BLANK_RUN_PATTERN)) {
    const run = { start: match.index, end: match.index + match[0].length, blanks: countBlanks(match[0]) };
    const previous = current.at(-1);
    if (previous && !sameStretch(previous, run, text.slice(previous.end, run.start))) {
      stretches.push(current);
      current = [];
    }
    current.push(run);
  }
  if (current.length > 0) stretches.push(current);
  return stretches;
}

function sameStretch(previous: BlankRun, next: BlankRun, gap: string): boolean {
  if (gap.length > 2 * STRETCH_GAP || BREAKS_STRETCH.test(gap)) return false;
  // In code points: an emoji (a surrogate pair) separates as one character does.
  const characters = [...gap].length;
  return characters <= STRETCH_GAP && Math.min(previous.blanks, next.blanks) >= STRETCH_RUN_RATIO * characters;
}

function countBlanks(run: string): number {
  let blanks = 0;
  for (const character of run) if (IS_BLANK.test(character)) blanks += 1;
  return blanks;
}

/** Counted: one run of BLANK_RUN blanks or more, or a stretch of several runs with STRETCH_BLANKS or more. */
function isCounted(stretch: readonly BlankRun[]): boolean {
  const blanks = stretch.reduce((sum, run) => sum + run.blanks, 0);
  return stretch.length === 1 ? blanks >= BLANK_RUN : blanks >= STRETCH_BLANKS;
}

/**
 * An approval's input as a person is shown it: every run of BLANK_RUN or more blanks as
 * `<N blanks>`, naming the blanks other than spaces and tabs in it (`<3000 blanks including
 * U+00A0>`: they do not split a shell word as a space does), and the characters that show as
 * nothing among them (`<12751 blanks, with 850 invisible characters (U+180B)>`). A command such
 * as `curl … | sh #` followed by thousands of blanks and `npm test` left only `npm test` on the
 * screen above the question. Runs a few characters apart are counted as one stretch when it
 * is long and mostly blank (blankStretches), quoting what lay between them: `<15000 blanks,
 * between them 999 other characters (U+002E): " . . …">`. Run it before escapeForDisplay,
 * which would turn U+3164 into text. The approval binds the input's sha256, not what is shown.
 *
 * Blank lines too: every run of BLANK_LINE_RUN or more lines that show as nothing is one line
 * `<N blank lines>` (naming the characters in them other than spaces, tabs and CRs). In code
 * mode newlines stay, and `curl … | sh` followed by 200 empty lines and `npm ci` left only
 * `npm ci` above the question of a spec.sandbox.setup. Lines are counted first: a blank line
 * whose blanks were counted would read `<20 blanks>`, and 200 of those scroll just the same.
 */
export function blankRunsCounted(text: string): { text: string; runs: number } {
  let runs = 0;
  // Some kinds by name: there are thousands of invisible ones (the tag characters), and the count is what warns.
  const names = (of: string[]) => {
    const kinds = [...new Set(of)];
    return `${kinds.slice(0, NAMED_KINDS).map(codePointName).join(', ')}${kinds.length > NAMED_KINDS ? ', …' : ''}`;
  };
  const lines = text.split('\n');
  // The empty string after a final newline is no line of its own.
  const last = lines.length > 1 && lines[lines.length - 1] === '' ? lines.length - 1 : lines.length;
  const kept: string[] = [];
  for (let start = 0; start < lines.length;) {
    let end = start;
    while (end < last && IS_BLANK_LINE.test(lines[end]!)) end += 1;
    if (end - start >= BLANK_LINE_RUN) {
      runs += 1;
      const others = [...lines.slice(start, end).join('')].filter((character) => !/[ \t\r]/.test(character));
      kept.push(`<${end - start} blank lines${others.length > 0 ? ` including ${names(others)}` : ''}>`);
      start = end;
    } else {
      kept.push(lines[start]!);
      start += 1;
    }
  }
  const joined = kept.join('\n');
  // What a run, or a stretch of runs, is shown as: its blanks counted, those other than spaces
  // and tabs named, what shows as nothing among them counted and named, and what stood between
  // the runs of a stretch counted, named and quoted, each run as one space (where bash splits
  // it), so that nothing that would run is hidden in the count.
  const counted = (stretch: readonly BlankRun[]) => {
    runs += 1;
    const inRuns = stretch.flatMap((run) => [...joined.slice(run.start, run.end)]);
    const between = stretch.slice(1).map((run, index) => joined.slice(stretch[index]!.end, run.start));
    const blanks = inRuns.filter((character) => IS_BLANK.test(character));
    const others = blanks.filter((blank) => !PLAIN_BLANK.test(blank));
    const invisible = inRuns.filter((character) => !IS_BLANK.test(character));
    const separating = [...between.join('')];
    const including = others.length > 0 ? ` including ${names(others)}` : '';
    const among =
      invisible.length > 0
        ? `, with ${invisible.length} invisible character${invisible.length === 1 ? '' : 's'} (${names(invisible)})`
        : '';
    const quoted = [...` ${between.join(' ')} `];
    const apart =
      separating.length > 0
        ? `, between them ${separating.length} other character${separating.length === 1 ? '' : 's'} (${names(separating)}): ` +
          // All of it: at most a quarter of the stretch (STRETCH_RUN_RATIO), and a cut hid
          // `; id ; rm -rf ~/x` past 40 characters of dots behind a '…'.
          `"${quoted.join('')}"`
        : '';
    return `<${blanks.length} blanks${including}${among}${apart}>`;
  };
  let shown = '';
  let at = 0;
  for (const stretch of blankStretches(joined)) {
    if (isCounted(stretch)) {
      shown += joined.slice(at, stretch[0]!.start) + counted(stretch);
      at = stretch.at(-1)!.end;
      continue;
    }
    // A stretch too short to count still holds its long runs.
    for (const run of stretch) {
      if (run.blanks < BLANK_RUN) continue;
      shown += joined.slice(at, run.start) + counted([run]);
      at = run.end;
    }
  }
  shown += joined.slice(at);
  return { text: shown, runs };
}

export const ESCAPE_WARNING =
  'warning: the output holds control or bidirectional characters, or blanks that are not spaces; they are shown escaped ' +
  '(ESC as ^[, a bidi override as <U+202E>, a no-break space as <U+00A0>)';
export const BLANK_RUNS_WARNING =
  'warning: long runs of blanks in the output are shown counted, as <N blanks> (and blank lines as <N blank lines>)';

/** How a stream shows text to a person: the escape mode, and whether long blank runs are counted (an approval's input). */
export interface PersonView {
  mode: EscapeMode;
  countBlankRuns?: boolean;
}

/**
 * One output stream's view of escaping: with `terminal` (a terminal, or a person's text on
 * its way through a pipe: exact-output.ts), text is escaped and the first escape prints one
 * warning; otherwise the bytes go out exactly, so a redirected diff still applies.
 */
export class TerminalText {
  private readonly warned = new Set<string>();

  constructor(
    private readonly options: {
      terminal: boolean;
      warn: (line: string) => void;
      /** Added to the warning, e.g. how to get the exact bytes. */
      hint?: string;
      /** How a person is shown this stream's text; 'lines' and no counting unless given. */
      view?: PersonView;
    },
  ) {}

  show(text: string, mode: EscapeMode = this.options.view?.mode ?? 'lines'): string {
    if (!this.options.terminal) return text;
    // Counted first: escaped, a run of 3000 U+3164 would be 24000 characters of <U+3164>.
    const counted = this.options.view?.countBlankRuns ? blankRunsCounted(text) : { text, runs: 0 };
    const result = escapeForDisplay(counted.text, mode);
    if (counted.runs > 0) this.warnOnce(BLANK_RUNS_WARNING);
    if (result.escaped > 0) this.warnOnce(ESCAPE_WARNING);
    return result.text;
  }

  private warnOnce(warning: string): void {
    if (this.warned.has(warning)) return;
    this.warned.add(warning);
    this.options.warn(`${warning}${this.options.hint ? `; ${this.options.hint}` : ''}`);
  }
}
