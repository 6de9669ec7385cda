// The run spec.continueFrom names is not the one this run was accepted with: status.continuedFrom
// pinned its uid, and the run of that name now has another. Someone deleted the source and
// created another under its name in between (anyone who may create runs in the namespace can),
// so its commit, diff and summary are content nobody chose to continue from. Nothing of it is
// applied; retrying cannot help, a person checks the new run and creates this one again.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ContinueFromReplacedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ContinueFromReplacedError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly sourceName: string;
  /** status.continuedFrom.uid: the source as it was when this run was accepted. */
  readonly acceptedUid: string;
  /** The uid of the run that holds the name now. */
  readonly currentUid: string;

  constructor(options: { sourceName: string; namespace: string; acceptedUid: string; currentUid: string }) {
    super(
      REASONS.ContinueFromReplaced,
      `spec.continueFrom names CodingRun ${options.sourceName}, which was deleted and created again under its name after this run ` +
        `was accepted (uid ${options.acceptedUid} then, ${options.currentUid} now): it is not the run this one was accepted to ` +
        'continue, and nothing of it was applied. Find out who re-created it (kubectl get crun ' +
        `${options.sourceName} -n ${options.namespace} -o yaml); if it is the run to continue from, create this run again.`,
    );
    this.sourceName = options.sourceName;
    this.acceptedUid = options.acceptedUid;
    this.currentUid = options.currentUid;
  }

  static override isInstance(error: unknown): error is ContinueFromReplacedError {
    return RunFailure.hasMarker(error, symbol);
  }
}
