// Security #11.3: the model endpoint a run names is not (or no longer) in the operator's
// allowModelEndpoints. Raised before a Secret is read or a request is made.

const name = 'ModelEndpointNotAllowedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelEndpointNotAllowedError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'ModelEndpointNotAllowed' as const;

  constructor(message: string) {
    super(message);
  }

  static isInstance(error: unknown): error is ModelEndpointNotAllowedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
