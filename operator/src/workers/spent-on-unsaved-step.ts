// The tokens of a step's try that failed after the model answered and before anything of the
// step was saved: a step of reads only (or an answer) is saved only at its end
// (run-tool-calls.ts), so a retry asks the model again from the state the try began with. Its
// answer was paid for all the same: without this, a model whose calls made the toolbox fail
// (a background job that kills it) spent ten answers per step, BullMQ's tries, and status.usage
// and the budgets saw one. Only a thrown error comes here; a worker that dies is redone once
// per death, uncounted (docs/operations.md).
import { addUsage, type TokenUsage } from '../agent/usage-accounting.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import type { RunState } from './run-state.ts';
import { saveIfPresent } from './save-if-present.ts';

/**
 * Whether the saved state is still the one the step after `completed` steps began from, so a
 * retry asks the model again. A step saved before its calls (run-tool-calls.ts) or at its end
 * holds its answer and its usage, and is not asked again.
 */
export function asksTheModelAgain(saved: RunState, completed: number): boolean {
  return saved.stage === 'stepping' && saved.step === completed && saved.inFlight === undefined;
}

/**
 * Adds `spent` (the failed try's answers) to the saved state and counts its model call
 * (discardedModelCalls, which spec.budget.maxSteps counts too): the retry's check before its
 * model call then sees both budgets. Read again rather than taken from the step's own copy,
 * which has moved on and may have been saved; a failure here only logs, the step's own error
 * is the one that matters. A state gone (the run ended) is not written again.
 */
export async function keepSpentOfUnsavedStep(deps: AgentDependencies, ref: RunRef, completed: number, spent: TokenUsage): Promise<void> {
  try {
    const saved = await deps.states.load(ref);
    if (!saved || !asksTheModelAgain(saved, completed)) return;
    saved.usage = addUsage(saved.usage, spent);
    saved.discardedModelCalls = (saved.discardedModelCalls ?? 0) + 1;
    // Only over a state still there: the run's stop may have deleted it since the load, and a
    // run that ended has nothing to keep the tokens in (false: nothing written).
    await saveIfPresent(deps, saved);
  } catch (error) {
    deps.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not save the tokens of a failed step');
  }
}
