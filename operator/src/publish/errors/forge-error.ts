// A forge answered with an error (or could not be reached). Its message quotes the forge's own
// words, bounded and with the token cut out: it ends up in status.message and an Event.
const name = 'ForgeError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class ForgeError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  /** HTTP status, undefined when no answer came. */
  readonly status: number | undefined;

  constructor(message: string, status: number | undefined) {
    super(message);
    this.status = status;
  }

  static isInstance(error: unknown): error is ForgeError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
