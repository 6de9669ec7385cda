// The file given to `run -f` cannot be run: unreadable, not YAML, no CodingRun in it, or a
// CodingRun that fails the same validation the operator applies. Exit 1, like kubectl
// apply with a bad manifest; the message names the file and the field.
import { CliError } from './cli-error.ts';

export class ManifestError extends CliError {
  override readonly name = 'ManifestError';
}
