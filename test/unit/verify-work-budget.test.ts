// A failed check is handed back to the model only when the step that retry needs can run:
// verification judges the budget as the next step does before its call (discarded model calls
// and the namespace's tokens for the day included). Judged apart, a run at step 39 of 40 with
// one discarded call got a retry, the retry step stopped BudgetExceeded, and a run whose check
// is not required ended Failed with nothing published instead of Succeeded with its failure noted.
import { describe, expect, it } from 'vitest';
import { decideStop } from '../../operator/src/agent/stop-conditions.ts';
import { emptyUsage } from '../../operator/src/agent/usage-accounting.ts';
import { durationMs, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { verifyWork } from '../../operator/src/workers/verify-work.ts';

const NOW = Date.parse('2030-01-01T12:00:00Z');

interface Scene {
  readonly discardedModelCalls?: number;
  readonly step?: number;
  readonly required?: boolean;
  /** The namespace's tokens per day and what it has used today; absent, no namespace budget. */
  readonly namespaceDay?: { readonly tokensPerDay: number; readonly used: number };
}

async function verifyFailingCheck(scene: Scene) {
  const run = {
    metadata: { name: 'r', namespace: 'team', uid: 'uid-1' },
    spec: {
      budget: { maxSteps: 40, timeout: '1h' },
      verify: { command: 'npm test', required: scene.required ?? false, retries: 2, protect: [], timeout: '10m' },
    },
  } as unknown as ParsedCodingRun;
  const state = {
    step: scene.step ?? 39,
    discardedModelCalls: scene.discardedModelCalls ?? 0,
    usage: emptyUsage(),
    startedAt: NOW - 60_000,
    messages: [{ role: 'assistant', content: 'done' }],
    finalText: 'done',
    stage: 'finalizing',
  } as unknown as RunState;
  const enqueued: number[] = [];
  const events: string[] = [];
  const day = scene.namespaceDay;
  const deps = {
    sandboxes: {
      for: () => ({
        call: async () => ({
          ok: true,
          result: { exitCode: 1, stdout: '', stderr: '1 test failed', timedOut: false, outputCapped: false, durationMs: 10 },
        }),
      }),
    },
    transcript: { append: async () => {} },
    states: { save: async () => {} },
    events: { record: async (_run: unknown, event: { message: string }) => void events.push(event.message) },
    queue: { step: async (_ref: unknown, step: number) => void enqueued.push(step) },
    metrics: { namespaceTokensToday: { set: () => {} } },
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    now: () => new Date(NOW),
    ...(day
      ? {
          teamBudget: {
            policies: { policyOf: async () => ({ tokensPerDay: day.tokensPerDay }) },
            tally: { read: async () => day.used, add: async () => day.used },
          },
        }
      : {}),
  } as unknown as AgentDependencies;
  const outcome = await verifyWork(deps, run, state);
  return { outcome, state, enqueued, events, run };
}

describe('verification judges the budget as the next step does', () => {
  it('hands a failure back when the next step can run (the control)', async () => {
    const { outcome, state, enqueued } = await verifyFailingCheck({ step: 38 });
    expect(outcome).toBe('again');
    expect(enqueued).toEqual([38]);
    expect(state.stage).toBe('stepping');
  });

  it('counts discarded model calls against maxSteps: at step 39 of 40 with one discarded, the run succeeds with the failure noted', async () => {
    const { outcome, state, enqueued, run } = await verifyFailingCheck({ step: 39, discardedModelCalls: 1 });
    // The step a retry needs would stop before its call: the decision the verdict must match.
    const next = decideStop({
      steps: 39,
      discardedModelCalls: 1,
      lastStepHadToolCalls: true,
      usage: emptyUsage(),
      budget: run.spec.budget,
      startedAt: NOW - 60_000,
      timeoutMs: durationMs(run.spec.budget.timeout),
      now: NOW,
    });
    expect(next).toMatchObject({ stop: true, reason: 'BudgetExceeded' });
    expect(outcome).toBe('done');
    expect(enqueued).toEqual([]);
    expect(state.stop).toBeUndefined();
    expect(state.verificationNote).toMatch(/^Verification failed but is not required/);
  });

  it('fails a required check VerificationFailed, not BudgetExceeded, when the discarded call spent the last step', async () => {
    const { outcome, state, enqueued } = await verifyFailingCheck({ step: 39, discardedModelCalls: 1, required: true });
    expect(outcome).toBe('done');
    expect(enqueued).toEqual([]);
    expect(state.stop).toMatchObject({ reason: 'VerificationFailed' });
    expect(state.stop!.message).toMatch(/no retry was possible because all 40 steps of spec\.budget\.maxSteps are used \(1 of them/i);
  });

  it("hands no failure back once the namespace has spent today's tokens", async () => {
    const day = { tokensPerDay: 1_000, used: 1_000 };
    const recorded = await verifyFailingCheck({ step: 3, namespaceDay: day });
    expect(recorded.outcome).toBe('done');
    expect(recorded.enqueued).toEqual([]);
    expect(recorded.state.verificationNote).toMatch(/^Verification failed but is not required/);
    const failed = await verifyFailingCheck({ step: 3, namespaceDay: day, required: true });
    expect(failed.state.stop).toMatchObject({ reason: 'VerificationFailed' });
    expect(failed.state.stop!.message).toMatch(
      /because namespace team has used its tokens for today \(annotation chamvi\.dev\/tokens-per-day\)/,
    );
  });

  it('hands a failure back while the namespace has tokens left today', async () => {
    const { outcome } = await verifyFailingCheck({ step: 3, namespaceDay: { tokensPerDay: 1_000, used: 999 } });
    expect(outcome).toBe('again');
  });
});
