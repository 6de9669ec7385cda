// Every attempt failed with a transient error (429, 5xx, network, timeout): the run fails
// with status.reason ModelUnavailable. `cause` is the last attempt's error.

const name = 'ModelUnavailableError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelUnavailableError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'ModelUnavailable' as const;
  readonly provider: string;
  readonly attempts: number;
  /** HTTP status of the last attempt, when it got one. */
  readonly lastStatusCode: number | undefined;

  constructor(options: { provider: string; attempts: number; lastStatusCode?: number; lastProblem: string; cause?: unknown }) {
    super(
      `The ${options.provider} provider was unavailable after ${options.attempts} attempt(s); ` +
        // Problems such as a timeout are whole sentences already.
        `last problem: ${options.lastProblem.replace(/\.+$/, '')}. Check the provider's status and rate limits, then create the run again.`,
      { cause: options.cause },
    );
    this.provider = options.provider;
    this.attempts = options.attempts;
    this.lastStatusCode = options.lastStatusCode;
  }

  static isInstance(error: unknown): error is ModelUnavailableError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
