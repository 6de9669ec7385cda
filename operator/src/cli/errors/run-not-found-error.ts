// The named CodingRun does not exist in the namespace asked about.
import { CliError } from './cli-error.ts';

export class RunNotFoundError extends CliError {
  override readonly name = 'RunNotFoundError';
  constructor(namespace: string, name: string) {
    super(`codingrun "${name}" not found in namespace "${namespace}" (list runs with: kubectl codingrun get -n ${namespace})`);
  }
}
