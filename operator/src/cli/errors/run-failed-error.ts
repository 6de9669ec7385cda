// A local run that ended Failed or Cancelled: exit 1 with its reason and message, after
// the progress and any partial diff were printed.
import { CliError } from './cli-error.ts';

export class RunFailedError extends CliError {
  override readonly name = 'RunFailedError';
  constructor(name: string, phase: string, reason: string | undefined, message: string | undefined) {
    super(`codingrun/${name} ${phase}${reason ? ` (${reason})` : ''}: ${message || 'no message'}`);
  }
}
