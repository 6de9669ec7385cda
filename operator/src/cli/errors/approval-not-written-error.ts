// A bare `approve NAME` (no --sha256): the plugin has shown the pending call and writes no
// answer, since the answer would bind an input its sender saw only as it was written (the
// model asks again with another input after a timeout's deny; a run re-created under the name
// starts again at s1-c1). Exit 1, so a script that took the bare command for an approval stops.
import type { CodingRun, PendingApproval } from '../../api/index.ts';
import { approveCommand, SHOWN_INPUT_MAX_BYTES, type PendingInput } from '../approval-answer.ts';
import { CliError } from './cli-error.ts';

export class ApprovalNotWrittenError extends CliError {
  override readonly name = 'ApprovalNotWrittenError';
  constructor(run: CodingRun, namespace: string, pending: PendingApproval, input: PendingInput) {
    const runName = run.metadata.name;
    const call = `${pending.toolName} call ${pending.id}`;
    super(
      !input.whole
        ? `nothing was approved: status.pendingApproval of codingrun "${runName}" does not show that the input above is the whole ${call} ` +
            '(no matching size and sha256: an operator older than this plugin?); nobody can read what would run, so it cannot be approved: deny it'
        : !input.shownByApprove
          ? `nothing was approved: the input of ${call} is ${input.bytes} bytes, more than approve shows (${SHOWN_INPUT_MAX_BYTES}); ` +
            `read it with kubectl codingrun get ${runName} -n ${namespace} --input, then approve with --id ${pending.id} --sha256 HASH --uid ${run.metadata.uid} as it prints`
          : `nothing was approved: approve writes an answer only with --sha256, the digest of the input you read, so that it never approves ` +
            `a call you have not seen; to approve the ${call} shown above: ` +
            approveCommand(run, namespace, pending, input.sha256),
    );
  }
}
