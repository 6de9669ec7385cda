// Security #11.1: the run's state in Redis is not what the operator wrote (its seal does not
// verify, it does not fit the schema, or it names another run). A job that meets it acts on
// nothing in it: the run fails StateLost with this message.

const name = 'RunStateInvalidError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class RunStateInvalidError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly reason = 'StateLost' as const;

  constructor(detail: string) {
    super(
      `the run's state in Redis failed validation: ${detail}; was Redis written by something other than the operator? ` +
        'Nothing in that state was acted on. Create the run again, and check who can reach Redis (it needs a password; ' +
        'every operator replica needs the same stateKey).',
    );
  }

  static isInstance(error: unknown): error is RunStateInvalidError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
