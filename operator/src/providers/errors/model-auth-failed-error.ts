// The provider refused the API key (401/403). Retrying cannot help, so the run fails at once
// with status.reason ModelAuthFailed. The message names the Secret to fix, never the key.

const name = 'ModelAuthFailedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelAuthFailedError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'ModelAuthFailed' as const;
  readonly provider: string;
  readonly statusCode: number;

  constructor(options: { provider: string; statusCode: number; cause?: unknown }) {
    super(
      `The ${options.provider} provider rejected the API key (HTTP ${options.statusCode}). ` +
        'Check that spec.model.apiKeySecretRef names a Secret in the run namespace holding a valid key ' +
        'with access to the model, then create the run again.',
      { cause: options.cause },
    );
    this.provider = options.provider;
    this.statusCode = options.statusCode;
  }

  static isInstance(error: unknown): error is ModelAuthFailedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
