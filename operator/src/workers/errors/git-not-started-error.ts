// git did not start (git-runner.ts): no directory to run in, no git binary, or arguments or an
// environment node refused. Node's own message for the last quotes the value it refused, and
// the environment holds the clone's token: this error names git and the error's code only, so
// what a clone or a publish says when git does not start can go into a run's status as it is.
const name = 'GitNotStartedError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class GitNotStartedError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  /** git as messages name it, "git <label>". */
  readonly label: string;
  /** The spawn error's code (ENOENT, ERR_INVALID_ARG_VALUE), when it had one. */
  readonly code: string | undefined;

  constructor(label: string, code: string | undefined) {
    super(`git ${label} could not start (${code ?? 'no error code'})`);
    this.label = label;
    this.code = code;
  }

  static isInstance(error: unknown): error is GitNotStartedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
