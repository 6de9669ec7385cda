// A job that finds its run ended or gone drops what the agent holds of it: its state in
// Redis and its sandbox connection. Nothing is written to the run (someone else ended it).
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';

export async function forgetRun(deps: Pick<AgentDependencies, 'states' | 'sandboxes'>, ref: RunRef): Promise<void> {
  await deps.states.delete(ref);
  await deps.sandboxes.release(ref.uid);
}
