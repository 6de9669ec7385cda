// Issue #15.4: a step counts its tokens against its namespace's day, and stops the run before
// its model call once the namespace has spent its chamvi.dev/tokens-per-day; the namespace's
// annotations are read at most every few seconds.
import { describe, expect, it } from 'vitest';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { NAMESPACE_POLICY_TTL_MS, cachedNamespacePolicyReader } from '../../operator/src/kube/namespace-policy-reader.ts';
import { countTeamTokens, teamBudgetStop, type TeamTokenBudget } from '../../operator/src/workers/team-token-budget.ts';

const logger = { info() {}, warn() {}, error() {}, child: () => logger };

function setup(annotations: Record<string, Record<string, string>>) {
  const days = new Map<string, number>();
  const tally: TeamTokenBudget['tally'] = {
    async add(namespace, day, tokens) {
      const key = `${namespace}/${day}`;
      days.set(key, (days.get(key) ?? 0) + tokens);
      return days.get(key)!;
    },
    async read(namespace, day) {
      return days.get(`${namespace}/${day}`) ?? 0;
    },
  };
  let now = new Date('2026-11-30T23:59:00Z');
  const deps = {
    teamBudget: { policies: cachedNamespacePolicyReader(async (namespace) => annotations[namespace]), tally },
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    logger,
    now: () => now,
  };
  return { deps, days, setNow: (next: string) => (now = new Date(next)) };
}

describe('tokens per day per namespace, in the step', () => {
  it('stops a run of a namespace that has spent its budget for the UTC day, naming the annotation, and not another namespace', async () => {
    const { deps } = setup({ team: { 'chamvi.dev/tokens-per-day': '250' }, other: {} });
    await countTeamTokens(deps, 'team', 200);
    expect(await teamBudgetStop(deps, 'team')).toBeUndefined();
    await countTeamTokens(deps, 'team', 100);
    const stop = await teamBudgetStop(deps, 'team');
    expect(stop).toMatchObject({ reason: 'BudgetExceeded' });
    expect(stop?.message).toContain('Namespace team has used 300 of its 250 tokens for 2026-11-30 (annotation chamvi.dev/tokens-per-day');
    expect(stop?.message).toContain('partial diff is kept');
    await countTeamTokens(deps, 'other', 10_000);
    expect(await teamBudgetStop(deps, 'other')).toBeUndefined();
    expect(await deps.metrics.registry.getSingleMetricAsString('chamvi_namespace_tokens_today')).toContain('namespace="other"} 10000');
  });

  it('starts a new tally at 00:00 UTC', async () => {
    const { deps, setNow } = setup({ team: { 'chamvi.dev/tokens-per-day': '100' } });
    await countTeamTokens(deps, 'team', 150);
    expect(await teamBudgetStop(deps, 'team')).toBeDefined();
    setNow('2026-12-01T00:00:01Z');
    expect(await teamBudgetStop(deps, 'team')).toBeUndefined();
  });

  it('a budget of 0 (or a malformed one) stops every run at once', async () => {
    const { deps } = setup({ zero: { 'chamvi.dev/tokens-per-day': '0' }, bad: { 'chamvi.dev/tokens-per-day': 'unlimited' } });
    expect(await teamBudgetStop(deps, 'zero')).toMatchObject({ reason: 'BudgetExceeded' });
    expect(await teamBudgetStop(deps, 'bad')).toMatchObject({ reason: 'BudgetExceeded' });
  });
});

describe('cachedNamespacePolicyReader', () => {
  it('reads a namespace at most once per TTL, and again after it', async () => {
    let reads = 0;
    let clock = 0;
    const reader = cachedNamespacePolicyReader(
      async () => {
        reads++;
        return { 'chamvi.dev/max-active-runs': String(reads) };
      },
      () => clock,
    );
    expect((await reader.policyOf('team')).maxActiveRuns).toBe(1);
    clock += NAMESPACE_POLICY_TTL_MS - 1;
    expect((await reader.policyOf('team')).maxActiveRuns).toBe(1);
    clock += 1;
    expect((await reader.policyOf('team')).maxActiveRuns).toBe(2);
  });

  it('does not keep a failed read', async () => {
    let fail = true;
    const reader = cachedNamespacePolicyReader(async () => {
      if (fail) throw new Error('API server unreachable');
      return {};
    });
    await expect(reader.policyOf('team')).rejects.toThrow('unreachable');
    fail = false;
    await expect(reader.policyOf('team')).resolves.toEqual({ problems: [] });
  });
});
