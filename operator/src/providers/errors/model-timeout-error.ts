// One attempt at a model call took longer than the per-attempt timeout. It is retried like
// a 5xx; when no attempt is left it becomes the cause of a ModelUnavailableError.

const name = 'ModelTimeoutError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelTimeoutError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'ModelUnavailable' as const;
  readonly provider: string;
  readonly timeoutMs: number;

  constructor(options: { provider: string; timeoutMs: number }) {
    super(
      `The ${options.provider} provider did not answer within ${options.timeoutMs} ms. ` +
        'The endpoint may be overloaded or unreachable; raise the attempt timeout or check the endpoint.',
    );
    this.provider = options.provider;
    this.timeoutMs = options.timeoutMs;
  }

  static isInstance(error: unknown): error is ModelTimeoutError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
