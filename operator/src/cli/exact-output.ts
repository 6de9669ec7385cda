// Which commands print data whose bytes must survive a redirect, and which print for a person
// only. A person's text is escaped wherever stdout goes: `kubectl codingrun get | grep x` and
// `logs | head` still end on a terminal, and grep and head pass ESC through. Data goes out
// exactly when redirected: a diff saved to a file still applies, `get --input` hashes to the
// approval's sha256, and -o json writes every control and bidi character as \uXXXX
// (escaped-json.ts), so its exact bytes hold none.
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
