// The one error type that ends a run: it carries the status.reason the run fails with, and
// its message is the status.message. Whatever throws it (a provider, the clone, the state
// store, a job), the worker maps it to status in one place (workers/job-failure.ts).
//
// isInstance checks a Symbol.for marker rather than the prototype chain (the vercel/ai
// pattern): two copies of this module (a bundle and a test, two package versions) still
// recognise each other's errors. Subclasses that carry extra fields (the provider errors)
// add a marker of their own and check both.
import type { Reason } from './reasons.ts';

const name = 'RunFailure';
const marker = Symbol.for(`chamvi.error.${name}`);

export class RunFailure extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  readonly reason: Reason;

  constructor(reason: Reason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }

  /** True for a RunFailure (or a subclass) from any copy of this module. */
  static isInstance(error: unknown): error is RunFailure {
    return RunFailure.hasMarker(error, marker);
  }

  /** For subclasses: the error is a RunFailure and carries `subclassMarker` too. */
  protected static hasMarker(error: unknown, subclassMarker: symbol): boolean {
    return (
      typeof error === 'object' &&
      error !== null &&
      (error as Record<symbol, unknown>)[marker] === true &&
      (error as Record<symbol, unknown>)[subclassMarker] === true
    );
  }
}
