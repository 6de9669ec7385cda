// A job of a run that still lives but whose spec no longer parses by this operator's rules (an
// upgrade refused a field an older operator accepted: a CHAMVI_* env name, a recorded template
// gone) did nothing and is to be tried again later. The controller ends such a started run
// Failed InvalidSpec keeping its diff, taken against the commit the run's state names
// (reconcile/decide.ts, run-reconciler.ts keepDiff), and that ending's stop removes the job and
// deletes the state. So the job keeps the state: a job that let the run go (forgetRun) deleted it
// first, and the diff then kept had no revision, so the spec.continueFrom its message suggests
// was refused. Put off exactly as a job with a cancel requested is, its tries unspent
// (job-put-off-error.ts).
import { JobPutOffError } from './job-put-off-error.ts';

const name = 'SpecNoLongerValidError';
/** The refusal is the run author's words quoted by the parser: cut, as the message may be logged. */
const REFUSAL_SHOWN = 300;
const marker = Symbol.for(`chamvi.error.${name}`);

export class SpecNoLongerValidError extends JobPutOffError {
  private readonly [marker] = true;
  override readonly name: string = name;

  /** `held`: what the job did not do; `refusal`: why the spec does not parse (validate-run.ts parseSpec), when the job read it. */
  constructor(held: string, refusal?: string) {
    super(
      `the run's spec no longer parses by this operator's rules${refusal ? ` (${refusal.slice(0, REFUSAL_SHOWN)})` : ''}, so this job did not ${held}; it keeps the run's state and is tried again later: the controller ends the run Failed InvalidSpec keeping its diff, which removes the job. Nothing to do here; the run's status says how to go on`,
    );
  }

  static override isInstance(error: unknown): error is SpecNoLongerValidError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
