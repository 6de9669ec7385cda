// The base of every error the plugin reports to its user: a message that says what happened
// and what to do, and the exit code it maps to (1 error, 2 usage).
export class CliError extends Error {
  override readonly name: string = 'CliError';
  readonly exitCode: 1 | 2 = 1;
  readonly isCliError = true;
  static isInstance(error: unknown): error is CliError {
    return error instanceof Error && (error as { isCliError?: unknown }).isCliError === true;
  }
}
