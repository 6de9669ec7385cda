// Bad command line: unknown command or flag, missing or extra argument. Exit code 2, and the
// message names the command whose --help explains it.
import { CliError } from './cli-error.ts';

export class UsageError extends CliError {
  override readonly name = 'UsageError';
  override readonly exitCode = 2;
  constructor(
    message: string,
    /** The command whose usage to point at, when known. */
    readonly command?: string,
  ) {
    super(message);
  }
  static override isInstance(error: unknown): error is UsageError {
    return CliError.isInstance(error) && error.name === 'UsageError';
  }
}
