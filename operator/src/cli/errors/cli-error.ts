// The base of every error the plugin reports to its user: a message that says what happened
// and what to do, and the exit code it maps to (1 error, 2 usage). Not a RunFailure: these
// end a command of the plugin, not a run (a run that failed is reported as RunFailedError).
const marker = Symbol.for('chamvi.error.CliError');

export class CliError extends Error {
  private readonly [marker] = true;
  override readonly name: string = 'CliError';
  readonly exitCode: 1 | 2 = 1;
  /** Marker based (the vercel/ai pattern), like RunFailure. */
  static isInstance(error: unknown): error is CliError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
