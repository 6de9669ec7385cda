// The worker's clone of spec.repository failed: git could not fetch it, or it is larger than
// the operator allows on its disk (security #11.7). The run fails with status.reason CloneFailed;
// the message never holds the token (git-clone.ts scrubs git's output).

const name = 'CloneFailedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class CloneFailedError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'CloneFailed' as const;

  constructor(message: string) {
    super(message);
  }

  static isInstance(error: unknown): error is CloneFailedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
