// Security #11.3: a worker was about to use a Secret that does not carry the usable-by-runs
// label (it was removed after the run was accepted, or the run never went through admission).
// The value is not used; the run fails with SecretNotAllowed and a message naming the label.

const name = 'SecretNotAllowedError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class SecretNotAllowedError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'SecretNotAllowed' as const;

  constructor(message: string) {
    super(message);
  }

  static isInstance(error: unknown): error is SecretNotAllowedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
