// The provider refused the API key (401/403). Retrying cannot help, so the run fails at once
// with status.reason ModelAuthFailed. The message names the Secret to fix, never the key.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelAuthFailedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelAuthFailedError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly provider: string;
  readonly statusCode: number;

  constructor(options: { provider: string; statusCode: number; cause?: unknown }) {
    super(
      REASONS.ModelAuthFailed,
      `The ${options.provider} provider rejected the API key (HTTP ${options.statusCode}). ` +
        'Check that spec.model.apiKeySecretRef names a Secret in the run namespace holding a valid key ' +
        'with access to the model, then create the run again.',
      { cause: options.cause },
    );
    this.provider = options.provider;
    this.statusCode = options.statusCode;
  }

  static override isInstance(error: unknown): error is ModelAuthFailedError {
    return RunFailure.hasMarker(error, symbol);
  }
}
