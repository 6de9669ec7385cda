// A job acts only on the run as it is now: read from the API server (or as it returned the
// run a moment ago, within kube/recent-runs.ts's bound, which says why that is safe), the same run
// (uid) as the job's, not deleted and not finished, with a spec that still parses. The
// model, budgets and approval tools come from here, never from Redis (Security #11.1).
import { codingRunSpec, isTerminal, type ParsedCodingRun } from '../api/index.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { effectiveSpecInput } from '../reconcile/run-template.ts';

/** The run as it is now, if it still exists, is the same run and is not finished. */
export async function liveRun(deps: Pick<AgentDependencies, 'getRun'>, ref: RunRef): Promise<ParsedCodingRun | undefined> {
  const run = await deps.getRun(ref.namespace, ref.name);
  if (!run || run.metadata.uid !== ref.uid || run.metadata.deletionTimestamp) return undefined;
  if (isTerminal(run.status?.phase)) return undefined;
  // spec.templateRef: the template recorded when the run was accepted, with the run's own fields over it.
  const input = effectiveSpecInput(run);
  if (!input.ok) return undefined;
  const spec = codingRunSpec.safeParse(input.spec);
  return spec.success ? { ...run, spec: spec.data } : undefined;
}
