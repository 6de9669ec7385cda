// A job of a run with a cancel requested (chamvi.dev/cancel) did nothing and is to be tried again
// later: thrown rather than returned so that BullMQ keeps the job, under its own id, delayed for
// its next try. The controller ends a cancelled run only once it has taken the diff, and that
// ending's stop removes the job (agent-queue.ts); a cancel withdrawn before that lets the next try
// go on. A job that returned instead was done with: a withdrawn cancel left a step run with no job
// (StateLost), and an approval's resume job used up (its id kept for an hour, so the answer was
// not queued again until then). Not a RunFailure: job-failure.ts puts the job off, its tries
// unspent (agent-worker.ts delays it in BullMQ), for as long as the cancel stands and the run lives.
import { JobPutOffError } from './job-put-off-error.ts';

const name = 'CancelRequestedError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class CancelRequestedError extends JobPutOffError {
  private readonly [marker] = true;
  override readonly name: string = name;

  /** `held`: what the job did not do (ask the model, run the approved call). */
  constructor(held: string) {
    super(
      `a cancel is requested for the run (annotation chamvi.dev/cancel), so this job did not ${held}; it is tried again later: the controller ends the run once its diff is taken, which removes the job, and a cancel withdrawn before that lets the job go on. Nothing to do`,
    );
  }

  static override isInstance(error: unknown): error is CancelRequestedError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
