// A job of a run the controller has not accepted yet did nothing and is to be tried again later.
// A run given a warm pool pod is accepted in the write made after its agent is queued
// (reconcile/run-template.ts awaitsAcceptance), so its first job may read it before that write:
// a run naming a CodingRunTemplate then holds no status.template and has no spec to run yet. The
// job reads it again for a few seconds (live-run.ts runNow); a write later than that is not a spec
// refused (SpecNoLongerValidError would say the controller ends the run InvalidSpec, which it does
// not): the job is put off, its tries unspent (job-put-off-error.ts), and its next try finds the
// run accepted, or ended by the controller (its template gone: TemplateNotFound), whose stop
// removes the job.
import { JobPutOffError } from './job-put-off-error.ts';

const name = 'AwaitingAcceptanceError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class AwaitingAcceptanceError extends JobPutOffError {
  private readonly [marker] = true;
  override readonly name: string = name;

  /** `held`: what the job did not do (clone the repository, ask the model). */
  constructor(held: string) {
    super(
      `the run is not accepted yet (it names a CodingRunTemplate, and the controller's write that accepts it and records the template in status.template has not landed), so this job did not ${held}; it is tried again later: it goes on once the run is accepted, and the controller's ending of a run it refuses removes the job. Nothing to do unless this repeats: then the controller is not writing the run's status (see its log)`,
    );
  }

  static override isInstance(error: unknown): error is AwaitingAcceptanceError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
