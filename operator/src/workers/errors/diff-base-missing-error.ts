// The commit the run cloned, against which its change is taken (take-diff.ts), is not in the
// sandbox's repository any more: the model rewrote or pruned .git (`git gc --prune=now` after a
// reset, objects deleted). Taken against anything else (HEAD, as the take once fell back to), the
// diff would be a change the model chose the base of: what it committed drops out of it, or a
// commit it made stands in for the clone. Retrying cannot bring the commit back.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'DiffBaseMissingError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class DiffBaseMissingError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  /** The commit the take was asked to diff against (HEAD when the run recorded none). */
  readonly base: string;

  constructor(base: string) {
    super(
      REASONS.AgentFailed,
      `taking the diff failed: the commit the run cloned (${base}) is no longer in the sandbox's repository: its .git was ` +
        'rewritten or pruned in the run, so the change cannot be taken against the commit the run started from, and no diff ' +
        "of the sandbox is kept as the run's change. Run it again; if the model rewrote git history, tell it not to.",
    );
    this.base = base;
  }

  static override isInstance(error: unknown): error is DiffBaseMissingError {
    return RunFailure.hasMarker(error, symbol);
  }
}
