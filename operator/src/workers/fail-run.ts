// Ends a run as Failed from a worker: the terminal status (computed by
// reconcile/run-status-transitions.ts, as the controller's is), its Warning Event and metrics,
// then the agent forgets the run. The worker reaches this through job-failure.ts, which
// maps what a job threw to the reason.
import { failStatus } from '../reconcile/run-status-transitions.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { forgetRun } from './forget-run.ts';
import { observeFinished } from './run-metrics.ts';

export async function failRun(deps: AgentDependencies, ref: RunRef, reason: string, message: string): Promise<void> {
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, run) =>
    failStatus(status, reason, message, run.metadata.generation ?? 0, now),
  );
  if (outcome.written) {
    await deps.events.record(outcome.run, { type: 'Warning', reason, message });
    observeFinished(deps, outcome.run, 'Failed', reason);
  }
  // deps.logger is the job's child logger: the run's namespace, name and uid are bound.
  deps.logger.warn({ reason }, message);
  await forgetRun(deps, ref);
}
