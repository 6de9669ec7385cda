// The line said again right above the command that approves a long input, as run --local says
// its question's subject again above "Approve? [y/N]" (local/terminal-approver.ts). An input
// taller than a screen scrolls its start away before the approver reaches the command, and
// the start is where `curl … | sh #` sits when what follows it is padding: counting blanks
// (display-escape.ts) shortens the padding it recognises, and this line covers the rest.
import { quotedInline } from './display-escape.ts';

/** An input (as stored, or as shown) longer than this in lines or characters gets the reminder. */
export const LONG_INPUT_LINES = 20;
export const LONG_INPUT_CHARACTERS = 1_000;
/** How much of the start of what was shown the reminder quotes, escaped on its one line. */
export const REMINDER_CHARACTERS = 200;

const lineCount = (text: string) => text.split('\n').length;
const counted = (count: number, unit: string) => `${count} ${unit}${count === 1 ? '' : 's'}`;

/**
 * `That is the input of bash call s1-c1: 16060 characters on 1 line; it begins: {"command":…`,
 * or undefined when the input and what was shown of it fit on a screen. `shown` is the text as
 * printed above, long blank runs counted: its start is what the approver read first.
 */
export function longInputReminder(call: string, input: string, shown: string): string | undefined {
  const long = (text: string) => lineCount(text) > LONG_INPUT_LINES || text.length > LONG_INPUT_CHARACTERS;
  if (!long(input) && !long(shown)) return undefined;
  const size = `${counted(input.length, 'character')} on ${counted(lineCount(input), 'line')}`;
  return `That is the input of ${call}: ${size}; it begins: ${quotedInline(shown, REMINDER_CHARACTERS)}`;
}
