// Security #11.6: `diff NAME` found a ConfigMap under the run's diff name that the run does not
// own. Anyone who can create ConfigMaps in the namespace can make one with any name and labels,
// so its content is not the run's diff; it is not printed.
import { CliError } from './cli-error.ts';

export class DiffNotOwnedError extends CliError {
  override readonly name = 'DiffNotOwnedError';
}
