// approve on an input the approver has not been shown whole (too long for approve to print,
// or not provably the whole call), or with a --sha256 that is not the pending input's
// (Security #11.5): the plugin writes nothing and says how to read the input and approve it.
import { CliError } from './cli-error.ts';

export class ApprovalInputError extends CliError {
  override readonly name = 'ApprovalInputError';
}
