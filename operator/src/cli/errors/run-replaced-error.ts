// approve/deny --uid UID, but the run that holds the name now has another uid: the run the
// approver read was deleted and another created under its name since. Its pending call may have
// the same id and even the same input (a scripted provider asks the same first call), yet it
// runs another task, repository, setup or egress: an answer meant for the first must not reach
// it, so the plugin writes nothing.
import { CliError } from './cli-error.ts';

export class RunReplacedError extends CliError {
  override readonly name = 'RunReplacedError';
  constructor(runName: string, namespace: string, readUid: string, currentUid: string, decision: 'approve' | 'deny') {
    super(
      `nothing was ${decision === 'approve' ? 'approved' : 'denied'}: codingrun "${runName}" in namespace "${namespace}" is now another run ` +
        `(uid ${currentUid}) than the one you read (uid ${readUid}); it was deleted and re-created under its name since, and may run ` +
        `another task or repository. Read it with kubectl codingrun get ${runName} -n ${namespace}, and answer it only with the command that prints`,
    );
  }
}
