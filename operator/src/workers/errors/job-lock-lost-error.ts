// This worker lost the lock on a job it was running: Redis did not renew it in time (it was
// unreachable, failing over, or refused the write), so another worker may run the same job now.
// The attempt ends without writing anything more; the job's other run is the one that counts.
const name = 'JobLockLostError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class JobLockLostError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  readonly jobId: string;

  constructor(jobId: string, why: string) {
    super(
      `job ${jobId} lost its lock (${why}): another worker may be running it, so this attempt stops without writing the run's state or queueing its next job. Nothing to do unless it recurs; then look at Redis's latency and failovers, or raise jobLockSeconds`,
    );
    this.jobId = jobId;
  }

  static isInstance(error: unknown): error is JobLockLostError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
