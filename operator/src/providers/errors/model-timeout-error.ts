// One attempt at a model call took longer than the per-attempt timeout. It is retried like
// a 5xx; when no attempt is left it becomes the cause of a ModelUnavailableError.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelTimeoutError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelTimeoutError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly provider: string;
  readonly timeoutMs: number;

  constructor(options: { provider: string; timeoutMs: number }) {
    super(
      REASONS.ModelUnavailable,
      `The ${options.provider} provider did not answer within ${options.timeoutMs} ms. ` +
        'The endpoint may be overloaded or unreachable; raise the attempt timeout or check the endpoint.',
    );
    this.provider = options.provider;
    this.timeoutMs = options.timeoutMs;
  }

  static override isInstance(error: unknown): error is ModelTimeoutError {
    return RunFailure.hasMarker(error, symbol);
  }
}
