// The scripted provider's script (API.md "The scripted model") is not valid JSON or does not
// match the schema. The message lists every problem with its path in the script.

const name = 'ModelScriptInvalidError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelScriptInvalidError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'ModelScriptInvalid' as const;
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(
      `The model script is invalid: ${problems.join('; ')}. ` +
        'Fix the JSON in the ConfigMap key named by spec.model.scriptRef (see "The scripted model" in API.md).',
    );
    this.problems = problems;
  }

  static isInstance(error: unknown): error is ModelScriptInvalidError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
