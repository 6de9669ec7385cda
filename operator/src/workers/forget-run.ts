// A job that finds its run ended or gone drops what the agent holds of it: its state in
// Redis, its sandbox connection and its kept model script. Nothing is written to the run
// (someone else ended it).
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';

export async function forgetRun(deps: Pick<AgentDependencies, 'states' | 'sandboxes' | 'scripts'>, ref: RunRef): Promise<void> {
  deps.scripts?.forget(ref.uid);
  await deps.states.delete(ref);
  await deps.sandboxes.release(ref.uid);
}
