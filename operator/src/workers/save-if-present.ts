// The save of a job that loaded its run's state and is about to act on it (run an approved
// call's followers, hand the run to publishing): made only over a state still in Redis. The stop
// that ends a run (a cancel's ending, a deletion) deletes the state and cannot remove a running
// job; a plain save would bring the state back (counted in its namespace's state bytes again)
// for a run that has ended, and the job would go on acting for it. Such a job lets the run go
// instead (saveOrLetGo): one line in the log, and what the agent holds of the run dropped.
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { RunStateGoneError } from './errors/run-state-gone-error.ts';
import { forgetRun } from './forget-run.ts';
import type { RunState } from './run-state.ts';

/** Saves the state only over one still in Redis (RunStateStore.save `ifPresent`): false, and nothing written, when it is gone. */
export async function saveIfPresent(deps: Pick<AgentDependencies, 'states'>, state: RunState): Promise<boolean> {
  try {
    await deps.states.save(state, { ifPresent: true });
    return true;
  } catch (error) {
    if (RunStateGoneError.isInstance(error)) return false;
    throw error;
  }
}

/** What a job says, and still records, when the run it acts for turns out to have ended. */
export interface LetGo {
  /** The log line: what ended the job's work and what is not done. */
  why: string;
  /** What the line carries besides the run (the job logger's bindings) and the state's step. */
  fields?: object;
  /** What is recorded of the run before it is let go (what a call did still belongs in its record). */
  recordFirst?: () => Promise<void>;
}

type LetGoDependencies = Pick<AgentDependencies, 'states' | 'sandboxes' | 'scripts' | 'logger'>;

/**
 * Saves the state only over one still in Redis: true when saved. The state was there when the
 * job began, so none there now means the stop that ends a run deleted it meanwhile, never a
 * state to create: nothing is written, the run is let go (letRunGo), and false.
 */
export async function saveOrLetGo(deps: LetGoDependencies, ref: RunRef, state: RunState, letGo: LetGo): Promise<boolean> {
  if (await saveIfPresent(deps, state)) return true;
  await letRunGo(deps, ref, state, letGo);
  return false;
}

/**
 * The run ended while the job acted for it: logs why (the job logger names the run), records
 * what is still to be recorded, and drops what the agent holds of it (forget-run.ts deletes,
 * never writes, the state).
 */
export async function letRunGo(deps: LetGoDependencies, ref: RunRef, state: RunState, letGo: LetGo): Promise<void> {
  deps.logger.info({ step: state.step, ...letGo.fields }, letGo.why);
  await letGo.recordFirst?.();
  await forgetRun(deps, ref);
}
