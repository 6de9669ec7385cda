// approve/deny on a run that is not waiting for an answer.
import { CliError } from './cli-error.ts';

export class NothingPendingError extends CliError {
  override readonly name = 'NothingPendingError';
  constructor(name: string, phase: string | undefined) {
    super(
      `codingrun "${name}" has no pending approval (phase ${phase ?? 'not set yet'}); only a run in phase WaitingForApproval can be approved or denied`,
    );
  }
}
