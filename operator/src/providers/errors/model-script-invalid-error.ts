// The scripted provider's script (API.md "The scripted model") is not valid JSON or does not
// match the schema. The message lists every problem with its path in the script.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelScriptInvalidError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelScriptInvalidError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(
      REASONS.ModelScriptInvalid,
      `The model script is invalid: ${problems.join('; ')}. ` +
        'Fix the JSON in the ConfigMap key named by spec.model.scriptRef (see "The scripted model" in API.md).',
    );
    this.problems = problems;
  }

  static override isInstance(error: unknown): error is ModelScriptInvalidError {
    return RunFailure.hasMarker(error, symbol);
  }
}
