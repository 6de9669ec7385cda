// A local run that ended Failed or Cancelled: exit 1 with its reason and message, after
// the progress and any partial diff were printed. Its message is one line, escaped: the status
// message can hold the model's or a provider's words, and a newline in it printed a line of
// their choosing after the error.
import { escapeForDisplay } from '../display-escape.ts';
import { CliError } from './cli-error.ts';

const oneLine = (text: string) => escapeForDisplay(text, 'inline').text;

export class RunFailedError extends CliError {
  override readonly name = 'RunFailedError';
  constructor(name: string, phase: string, reason: string | undefined, message: string | undefined) {
    super(`codingrun/${oneLine(name)} ${oneLine(phase)}${reason ? ` (${oneLine(reason)})` : ''}: ${oneLine(message || 'no message')}`);
  }
}
