// An attempt of a job failed and the worker let go of it (job-lease.ts): BullMQ may run the job
// again, here or in another worker, so whatever of the failed attempt still runs (a tool call its
// step left behind) writes nothing more. Its older copy of the run's state, saved after the
// retry's, would undo what the retry saved and stall the run.
const name = 'JobAttemptFailedError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class JobAttemptFailedError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  readonly jobId: string;

  constructor(jobId: string) {
    super(
      `an attempt of job ${jobId} failed and has ended, so what of it was still running stops without writing the run's state or queueing its next job; the job's next attempt is the one that counts. Nothing to do: the attempt's own error says why it failed`,
    );
    this.jobId = jobId;
  }

  static isInstance(error: unknown): error is JobAttemptFailedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
