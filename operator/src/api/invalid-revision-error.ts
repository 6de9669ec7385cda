// The revision a clone was asked for is not a git ref name (git-ref-name.ts). The schema refuses
// such a revision before a run is accepted; the clone checks the value it is handed again,
// because git reads a fetch's argument as a refspec and a NUL byte makes the spawn throw, and a
// value from anywhere else (a CRD installed without its validation, an older operator's state)
// must end the run InvalidSpec with the reason rather than reach git or be retried.
import { REASONS } from './reasons.ts';
import { RunFailure } from './run-failure.ts';

const name = 'InvalidRevisionError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class InvalidRevisionError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly revision: string;

  constructor(options: { revision: string; problem: string }) {
    super(
      REASONS.InvalidSpec,
      // JSON.stringify: a control character in the value shows as an escape, not raw in status.
      `spec.repository.revision ${JSON.stringify(options.revision).slice(0, 300)} ${options.problem}; ` +
        'name a branch, a tag or a commit id and create the run again',
    );
    this.revision = options.revision;
  }

  static override isInstance(error: unknown): error is InvalidRevisionError {
    return RunFailure.hasMarker(error, symbol);
  }
}
