// spec.model cannot be turned into a model: unknown provider, missing baseURL, missing key,
// no model name and no default. Raised before any call, so the message says what to set.

const name = 'ModelConfigurationError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelConfigurationError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'ModelConfigurationInvalid' as const;

  constructor(message: string) {
    super(message);
  }

  static isInstance(error: unknown): error is ModelConfigurationError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
