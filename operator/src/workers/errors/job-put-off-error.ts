// A job that did nothing and is to be tried again later, its tries unspent, because the run is
// waiting on the controller's ending: thrown rather than returned so that BullMQ keeps the job,
// under its own id, delayed for its next try (job-failure.ts puts it off; agent-worker.ts delays
// it). The controller's ending stops the agent, which removes the job. Not a RunFailure: a
// failure written here would overwrite the ending the controller is about to write. The kinds:
// CancelRequestedError (a cancel is requested), SpecNoLongerValidError (the run's spec no
// longer parses by this operator's rules) and AwaitingAcceptanceError (the controller's write
// that accepts the run has not landed yet; the job waits for that write, not for an ending).
const name = 'JobPutOffError';
const marker = Symbol.for(`chamvi.error.${name}`);

export abstract class JobPutOffError extends Error {
  private readonly [marker] = true;
  abstract override readonly name: string;

  static isInstance(error: unknown): error is JobPutOffError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
