// A job acts only on the run as it is now: read from the API server (or as it returned the
// run a moment ago, within kube/recent-runs.ts's bound, which says why that is safe), the same run
// (uid) as the job's, not deleted and not finished, with a spec that still parses. The
// model, budgets and approval tools come from here, never from Redis (Security #11.1).
import { setTimeout as delay } from 'node:timers/promises';
import { codingRunSpec, isTerminal, type ParsedCodingRun } from '../api/index.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { awaitsAcceptance, effectiveSpecInput } from '../reconcile/run-template.ts';

/**
 * How long a job reads its run again while the copy it has is from before the run was
 * accepted (awaitsAcceptance): the accepting write is one request behind the job's start.
 */
export const ACCEPTANCE_WAIT_MS = 5_000;
const ACCEPTANCE_POLL_MS = 25;

/** The run as it is now, if it still exists, is the same run and is not finished. */
export async function liveRun(deps: Pick<AgentDependencies, 'getRun' | 'getRunFresh'>, ref: RunRef): Promise<ParsedCodingRun | undefined> {
  let run = await deps.getRun(ref.namespace, ref.name);
  // Read fresh: what this process remembers of the run (kube/recent-runs.ts) may be that very copy.
  const deadline = Date.now() + ACCEPTANCE_WAIT_MS;
  while (run && run.metadata.uid === ref.uid && awaitsAcceptance(run) && Date.now() < deadline) {
    await delay(ACCEPTANCE_POLL_MS);
    run = await (deps.getRunFresh ?? deps.getRun)(ref.namespace, ref.name);
  }
  if (!run || run.metadata.uid !== ref.uid || run.metadata.deletionTimestamp) return undefined;
  if (isTerminal(run.status?.phase)) return undefined;
  // spec.templateRef: the template recorded when the run was accepted, with the run's own fields over it.
  const input = effectiveSpecInput(run);
  if (!input.ok) return undefined;
  const spec = codingRunSpec.safeParse(input.spec);
  return spec.success ? { ...run, spec: spec.data } : undefined;
}
