// The named CodingEval does not exist in the namespace asked about.
import { CliError } from './cli-error.ts';

export class EvalNotFoundError extends CliError {
  override readonly name = 'EvalNotFoundError';
  constructor(namespace: string, name: string) {
    super(`codingeval "${name}" not found in namespace "${namespace}" (list evals with: kubectl get codingevals -n ${namespace})`);
  }
}
