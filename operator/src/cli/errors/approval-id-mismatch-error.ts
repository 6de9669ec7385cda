// approve/deny --id ID, but the run waits for another call: answering would approve a call
// the user has not seen, so the plugin refuses instead.
import { CliError } from './cli-error.ts';

export class ApprovalIdMismatchError extends CliError {
  override readonly name = 'ApprovalIdMismatchError';
  constructor(name: string, given: string, pending: string, toolName: string) {
    super(
      `codingrun "${name}" is waiting for approval ${pending} (${toolName}), not ${given}; check it with kubectl codingrun get ${name}, then answer with --id ${pending}`,
    );
  }
}
