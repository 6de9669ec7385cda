// The provider answered with a client error other than auth or rate limiting (400, 404, 413,
// 422...): the request itself is wrong (unknown model, prompt too long, bad tool schema), so
// retrying the same request cannot succeed.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelRequestRejectedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelRequestRejectedError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly provider: string;
  readonly statusCode: number;

  constructor(options: { provider: string; statusCode: number; detail: string; cause?: unknown }) {
    super(
      REASONS.ModelRequestRejected,
      `The ${options.provider} provider rejected the request (HTTP ${options.statusCode}): ${options.detail}. ` +
        'Check spec.model.name and spec.model.contextWindow against what the endpoint supports.',
      { cause: options.cause },
    );
    this.provider = options.provider;
    this.statusCode = options.statusCode;
  }

  static override isInstance(error: unknown): error is ModelRequestRejectedError {
    return RunFailure.hasMarker(error, symbol);
  }
}
