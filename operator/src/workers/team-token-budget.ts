// A namespace's tokens per day (issue #15.4) as the step workers see it: each step adds its
// model calls' tokens to the namespace's tally, and a step stops the run before its model
// call once the namespace has spent its budget for the UTC day. The run then ends like any
// other run over budget (BudgetExceeded, its partial diff kept by finalize).
import { REASONS } from '../api/index.ts';
import type { NamespacePolicyReader } from '../kube/namespace-policy-reader.ts';
import { NAMESPACE_ANNOTATIONS, utcDay } from '../reconcile/namespace-policy.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import type { NamespaceTokenTally } from './namespace-token-tally.ts';

export interface TeamTokenBudget {
  policies: NamespacePolicyReader;
  tally: Pick<NamespaceTokenTally, 'add' | 'read'>;
}

type Deps = Pick<AgentDependencies, 'teamBudget' | 'metrics' | 'logger' | 'now'>;

/**
 * Adds a step's tokens to its namespace's day: as reported, or estimated for a call that
 * reported none (agent/usage-accounting.ts). Counted right after the model answered, before
 * anything else can fail: a step redone after a crash asks the model again and spends again.
 * A tally that cannot be written is logged, not thrown: a retried step would call the model twice.
 */
export async function countTeamTokens(deps: Deps, namespace: string, tokens: number): Promise<void> {
  if (!deps.teamBudget || tokens <= 0) return;
  try {
    const total = await deps.teamBudget.tally.add(namespace, utcDay(deps.now()), tokens);
    deps.metrics.namespaceTokensToday.set({ namespace }, total);
  } catch (error) {
    deps.logger.warn(
      { namespace, tokens, err: error instanceof Error ? error.message : String(error) },
      'could not add to the namespace token tally',
    );
  }
}

/** Why the run must stop before its next model call, when its namespace has spent today's tokens. */
export async function teamBudgetStop(deps: Deps, namespace: string): Promise<{ reason: 'BudgetExceeded'; message: string } | undefined> {
  if (!deps.teamBudget) return undefined;
  const { tokensPerDay } = await deps.teamBudget.policies.policyOf(namespace);
  if (tokensPerDay === undefined) return undefined;
  const day = utcDay(deps.now());
  const used = await deps.teamBudget.tally.read(namespace, day);
  deps.metrics.namespaceTokensToday.set({ namespace }, used);
  if (used < tokensPerDay) return undefined;
  return {
    reason: REASONS.BudgetExceeded,
    message:
      `Namespace ${namespace} has used ${used} of its ${tokensPerDay} tokens for ${day} (annotation ${NAMESPACE_ANNOTATIONS.tokensPerDay}, ` +
      'set by a cluster admin); the run stopped before its next model call and the partial diff is kept. ' +
      'Run it again after 00:00 UTC, or ask an admin to raise the budget.',
  };
}
