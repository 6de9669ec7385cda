// Ctrl-C (SIGINT) or SIGTERM during run --local: the run is abandoned, its sandbox and
// Redis are cleaned up, and the plugin exits 1.
import { CliError } from './cli-error.ts';

export class InterruptedError extends CliError {
  override readonly name = 'InterruptedError';
  constructor(name: string) {
    super(`interrupted: codingrun/${name} was stopped before it finished; nothing was kept`);
  }
}
