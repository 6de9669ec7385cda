// Which commands print data whose bytes must survive a redirect, and which print for a person
// only. A person's text is escaped wherever stdout goes: `kubectl codingrun get | grep x` and
// `logs | head` still end on a terminal, and grep and head pass ESC through. Data goes out
// exactly when redirected: a diff saved to a file still applies, `get --input` hashes to the
// approval's sha256, and -o json writes every control and bidi character as \uXXXX
// (escaped-json.ts), so its exact bytes hold none. A person is shown data as its kind needs:
// a diff or an input as code, an input with its long blank runs counted as approve shows it.
import { TerminalText, type PersonView } from './display-escape.ts';
import type { Command } from './parse-arguments.ts';

/** True when the command's stdout is data that a redirect must receive byte for byte. */
export function printsExactBytes(command: Command): boolean {
  switch (command.command) {
    case 'diff':
    case 'run':
      return true;
    case 'get':
      return command.input === true;
    case 'logs':
    case 'eval':
      return command.output === 'json';
    default:
      return false;
  }
}

/** Where a person who was shown escaped text finds the exact text. */
export function exactTextHint(command: Command | undefined): string {
  return command === undefined || printsExactBytes(command)
    ? 'redirect stdout to a file for the exact bytes'
    : 'the exact text is in kubectl get codingrun NAME -o yaml';
}

/**
 * How a person is shown the command's stdout. An approval's input and a diff are code: a blank
 * that is not a space is shown (display-escape.ts), and `get NAME --input` counts long blank runs
 * as approve does (Security #11.5: 20 000 spaces pushed `curl … | sh #` off the screen, and
 * approve sends an input over 16 KiB to get --input). get and approve show inputs too.
 */
export function personView(command: Command | undefined): PersonView {
  switch (command?.command) {
    case 'get':
      return command.input === true ? { mode: 'code', countBlankRuns: true } : { mode: 'code' };
    case 'approve':
    case 'diff':
    case 'run':
      return { mode: 'code' };
    default:
      return { mode: 'lines' };
  }
}

/**
 * The plugin's stdout as text: shown to a person (escaped, as personView says) on a terminal,
 * and through a pipe unless the command prints data; data redirected keeps its exact bytes.
 */
export function stdoutText(command: Command | undefined, options: { isTTY: boolean; warn: (line: string) => void }): TerminalText {
  return new TerminalText({
    terminal: options.isTTY || (command !== undefined && !printsExactBytes(command)),
    warn: options.warn,
    hint: exactTextHint(command),
    view: personView(command),
  });
}
