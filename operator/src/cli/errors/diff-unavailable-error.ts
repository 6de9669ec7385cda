// `diff NAME` on a run that has no diff (yet), or whose diff ConfigMap cannot be read.
import { CliError } from './cli-error.ts';

export class DiffUnavailableError extends CliError {
  override readonly name = 'DiffUnavailableError';
}
