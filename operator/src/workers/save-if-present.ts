// The save of a job that loaded its run's state and is about to act on it (run an approved
// call's followers, hand the run to publishing): made only over a state still in Redis. The stop
// that ends a run (a cancel's ending, a deletion) deletes the state and cannot remove a running
// job; a plain save would bring the state back (counted in its namespace's state bytes again)
// for a run that has ended, and the job would go on acting for it.
import type { AgentDependencies } from './agent-dependencies.ts';
import { RunStateGoneError } from './errors/run-state-gone-error.ts';
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
