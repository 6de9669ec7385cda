// A run's conversation is held in the operator's heap and in Redis while it steps. A run author
// chose contextWindow (up to 10M tokens in the CRD), and nothing summarised the conversation
// before it: 64 tool results of 64 KiB a step grew one run's state to 29 MB and ended a 160 MiB
// replica. The admin bounds the window (config.maxContextWindow), and a state past what a
// replica saves fails its run instead of the process.
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { parseSpec, validateRun } from '../../operator/src/reconcile/validate-run.ts';
import { RunStateStore, type RunState } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

describe('config.maxContextWindow', () => {
  const found = { secrets: {}, configMaps: { script: ['script.json'] }, secretLabels: {} };
  const validate = (contextWindow: number, config: Record<string, unknown> = {}) => {
    const run = codingRunFixture({ spec: { model: { provider: 'scripted', scriptRef: { name: 'script' }, contextWindow } } });
    const parsed = parseSpec(run);
    if (!parsed.ok) throw new Error(parsed.refusal.message);
    return validateRun(run, parsed.spec, loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], ...config }, {}), found);
  };

  it('refuses a window over the bound as InvalidSpec, saying both figures and what to change', () => {
    expect(validate(10_000_000)).toEqual({
      reason: 'InvalidSpec',
      message: expect.stringMatching(/contextWindow 10000000 is over this operator's maxContextWindow 1000000.*ask for at most that/),
    });
    expect(validate(1_000_000)).toBeUndefined();
    expect(validate(2_000_000, { maxContextWindow: 2_000_000 })).toBeUndefined();
  });
});

describe('the saved state', () => {
  const state = { uid: 'u', namespace: 'team', messages: [{ role: 'user', content: 'x'.repeat(2_000) }] } as unknown as RunState;

  it('fails the run BudgetExceeded past what a replica keeps, and writes nothing', async () => {
    // The write is one script (run-state.ts): its sixth argument is the sealed state.
    const writes: string[] = [];
    const redis = { eval: async (...args: unknown[]) => (writes.push(String(args[5])), ['saved']) } as unknown as Redis;
    const store = new RunStateStore(redis, 'chamvi', RunStateSeal.generated(), { maxStateBytes: 1_000 });
    const failure = await store.save(state).catch((error: unknown) => error);
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('BudgetExceeded');
    expect((failure as Error).message).toMatch(/saved conversation .* lower spec\.model\.contextWindow/);
    await expect(store.create(state)).rejects.toThrow(/saved conversation/);
    expect(writes).toEqual([]);
    // Within the bound it is written as before.
    await new RunStateStore(redis, 'chamvi', RunStateSeal.generated(), { maxStateBytes: 10_000 }).save(state);
    expect(writes).toHaveLength(1);
    expect(writes[0]).toContain('x'.repeat(2_000));
  });
});
