// Every attempt failed with a transient error (429, 5xx, network, timeout): the run fails
// with status.reason ModelUnavailable. `cause` is the last attempt's error.
import { REASONS } from '../../api/reasons.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelUnavailableError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelUnavailableError extends RunFailure {
  private readonly [symbol] = true;
  override readonly name: string = name;
  readonly provider: string;
  readonly attempts: number;
  /** HTTP status of the last attempt, when it got one. */
  readonly lastStatusCode: number | undefined;

  constructor(options: { provider: string; attempts: number; lastStatusCode?: number; lastProblem: string; cause?: unknown }) {
    super(
      REASONS.ModelUnavailable,
      `The ${options.provider} provider was unavailable after ${options.attempts} attempt(s); ` +
        // Problems such as a timeout are whole sentences already.
        `last problem: ${options.lastProblem.replace(/\.+$/, '')}. Check the provider's status and rate limits, then create the run again.`,
      { cause: options.cause },
    );
    this.provider = options.provider;
    this.attempts = options.attempts;
    this.lastStatusCode = options.lastStatusCode;
  }

  static override isInstance(error: unknown): error is ModelUnavailableError {
    return RunFailure.hasMarker(error, symbol);
  }
}
