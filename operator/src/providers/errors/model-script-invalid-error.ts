// The scripted provider's script (API.md "The scripted model") is not valid JSON or does not
// match the schema. The message lists the first problems with their paths in the script: a
// 1 MiB script of empty turns has 340 000 of them, and the whole list made a 25 MB message
// that held a worker's event loop for seconds on its way to the log.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelScriptInvalidError';
/** Problems the message names; the rest are counted. */
export const PROBLEMS_SHOWN = 10;
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelScriptInvalidError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly problems: readonly string[];

  /** `count`: how many problems there are, when `problems` holds only the first of them. */
  constructor(problems: readonly string[], count = problems.length) {
    const shown = problems.slice(0, PROBLEMS_SHOWN);
    super(
      REASONS.ModelScriptInvalid,
      `The model script is invalid: ${shown.join('; ')}${count > shown.length ? `; and ${count - shown.length} more` : ''}. ` +
        'Fix the JSON in the ConfigMap key named by spec.model.scriptRef (see "The scripted model" in API.md).',
    );
    this.problems = shown;
  }

  static override isInstance(error: unknown): error is ModelScriptInvalidError {
    return RunFailure.hasMarker(error, symbol);
  }
}
