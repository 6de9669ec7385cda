// A save meant only for a state that is still there (RunStateStore.save with `ifPresent`) found
// none: the run was ended meanwhile, and the stop that ended it (agent-queue.ts stop, forget-run.ts)
// deleted the state. Nothing was written, so the state is not brought back for a run that has
// ended. The step job takes it for the run ended during its model call (step-job.ts) and lets the
// run go; it is never a run's failure.
const name = 'RunStateGoneError';
const marker = Symbol.for(`chamvi.error.${name}`);

export class RunStateGoneError extends Error {
  private readonly [marker] = true;
  override readonly name: string = name;
  readonly uid: string;

  constructor(uid: string) {
    super(
      `the state of run ${uid} is no longer in Redis, so it was not saved again: the run was ended meanwhile (its stop deletes the state) and nothing more is done for it. Nothing to do`,
    );
    this.uid = uid;
  }

  static isInstance(error: unknown): error is RunStateGoneError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[marker] === true;
  }
}
