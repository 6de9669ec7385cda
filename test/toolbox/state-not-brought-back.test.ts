// A run ended (a cancel's ending, a deletion) while one of its step jobs was still running: the
// stop deleted the run's state in Redis, with its entry in the namespace's state-bytes tally, and
// could not remove the job. Every save the job makes after that must be made only over a state
// still there: a plain save re-created the state and put its bytes back in the tally
// (namespaceMaxStateBytes) until a later job forgot it, and at a stop before the model call or
// after the deadline it also queued a finalize the stop never saw. These are the saves that keep
// a failed step's spent tokens, the budget stops before the model call, and the deadline's stop.
// A real redis-server; the model a stand-in; the stop is the harness's stopDeletesState, done
// where the test says.
import type { LanguageModelV4Content } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { RunState, RunStateStore } from '../../operator/src/workers/run-state.ts';
import type { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { generatingModel } from '../support/generating-model.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runEndedHarness, stopDeletesState, type RunEndedHarnessOptions } from '../support/run-ended-harness.ts';

const server = redisServerForSuite();

type Harness = Awaited<ReturnType<typeof runEndedHarness>>;

const noCalls = async () => [];
const harness = (options: Partial<RunEndedHarnessOptions> = {}) =>
  runEndedHarness(server.redis, { prefix: 'state-not-brought-back', model: 'stopped-meanwhile', answer: noCalls, ...options });

/** A provider's answer that never came: a 503, a dropped connection. Not a RunFailure, so the job is retried. */
const unavailable = () => new Error('503 Service Unavailable: the model endpoint is overloaded');
/** The run's own deadline (the AbortSignal.timeout around the model call) ending the call. */
const deadlineHit = () => new DOMException('The operation was aborted due to timeout', 'TimeoutError');

/** What the stop left behind: nothing of the run's state, in its key or in its namespace's tally, and no job queued. */
async function expectStateGone(h: Harness): Promise<void> {
  expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
  expect(await h.tallied()).toBe(0);
  expect(h.enqueued).toEqual([]);
}

/** The run's state changed as `change` says, saved as the step finds it. */
async function withState(h: Harness, change: (state: RunState) => void): Promise<void> {
  const state = (await h.states.load(h.ref))!;
  change(state);
  await h.states.save(state);
}

/**
 * The job's state store, whose next load once armed is followed by the stop: the stop landing
 * between a load and the save after it, the window a job that looks before it saves still has.
 */
function stopAfterNextLoad(h: Harness): { arm(): void } {
  let armed = false;
  const states = Object.create(h.states) as RunStateStore;
  states.load = async (owner) => {
    const loaded = await h.states.load(owner);
    if (armed) {
      armed = false;
      await stopDeletesState(h);
    }
    return loaded;
  };
  h.deps.states = states;
  return { arm: () => void (armed = true) };
}

/**
 * A 1024-token window over a conversation whose older half is long: the step compacts it first,
 * a model call of its own that is answered and paid for, and then asks the model.
 */
const compacting = {
  spec: { model: { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' }, contextWindow: 1024 } },
} as const satisfies Partial<RunEndedHarnessOptions>;

async function longConversation(h: Harness): Promise<void> {
  await withState(h, (state) => {
    state.messages.push(
      { role: 'assistant', content: `I read the code. ${'It is long. '.repeat(500)}` },
      { role: 'user', content: 'Go on.' },
      { role: 'assistant', content: 'Looking further.' },
      { role: 'user', content: 'Go on.' },
    );
  });
}

/** A model whose first call (the compaction's) answers and whose second fails with `failure` after `meanwhile`. */
function summarisesThenFails(meanwhile: () => Promise<void>, failure: () => Error) {
  let calls = 0;
  const model = generatingModel('stopped-meanwhile', async (): Promise<LanguageModelV4Content[]> => {
    calls += 1;
    if (calls === 1) return [{ type: 'text', text: 'The code was read; it is long.' }];
    await meanwhile();
    throw failure();
  });
  return { model, calls: () => calls };
}

describe('a step whose model call fails after the run was stopped, its compaction paid for (the spent tokens kept)', () => {
  it('a failure the job retries: the tokens are not saved into a state brought back, and the job is still retried', async () => {
    const h = await harness(compacting);
    await longConversation(h);
    const model = summarisesThenFails(() => stopDeletesState(h), unavailable);
    h.deps.models = async () => model.model;
    const outcome = await h.step(0);
    expect(model.calls()).toBe(2);
    // The model's error is still what the job throws, for BullMQ to retry.
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toContain('503 Service Unavailable');
    await expectStateGone(h);
  });

  it("the run's deadline hit: no state brought back for the deadline's stop to save 'finalizing', and no finalize queued", async () => {
    const h = await harness(compacting);
    await longConversation(h);
    const model = summarisesThenFails(() => stopDeletesState(h), deadlineHit);
    h.deps.models = async () => model.model;
    // The run's sandbox session, as the step's first tool call would have opened it.
    const pool = h.deps.sandboxes as SandboxPool;
    pool.for((await h.deps.getRun(h.ref.namespace, h.ref.name))! as ParsedCodingRun);
    expect(pool.size).toBe(1);
    expect(await h.step(0)).toBe('done');
    expect(model.calls()).toBe(2);
    await expectStateGone(h);
    // Let go: a job that finds no state releases what this replica held for the run.
    expect(pool.size).toBe(0);
  });

  it('the run still there: the tokens the failed step spent are kept in its state', async () => {
    const h = await harness(compacting);
    await longConversation(h);
    const model = summarisesThenFails(async () => {}, unavailable);
    h.deps.models = async () => model.model;
    expect(await h.step(0)).toBeInstanceOf(Error);
    const state = (await h.states.load(h.ref))!;
    expect(state.step).toBe(0);
    expect(state.usage.totalTokens).toBeGreaterThan(0);
    expect(await h.tallied()).toBe(1);
  });
});

describe("the deadline's stop (run-agent-job.ts finalizeAfterDeadline), the run stopped between its load and its save", () => {
  it("does not save the state back as 'finalizing' nor queue a finalize", async () => {
    const h = await harness();
    const stop = stopAfterNextLoad(h);
    h.deps.models = async () =>
      generatingModel('stopped-meanwhile', async () => {
        stop.arm();
        throw deadlineHit();
      });
    expect(await h.step(0)).toBe('done');
    await expectStateGone(h);
  });

  it("the run still there: saves it 'finalizing' with DeadlineExceeded and queues finalize", async () => {
    const h = await harness();
    h.deps.models = async () =>
      generatingModel('stopped-meanwhile', async () => {
        throw deadlineHit();
      });
    expect(await h.step(0)).toBe('done');
    expect(await h.states.load(h.ref)).toMatchObject({ stage: 'finalizing', stop: { reason: 'DeadlineExceeded' } });
    expect(h.enqueued).toEqual(['finalize']);
  });
});

describe('a step of reads whose call fails, the run stopped before the spent tokens are saved (spent-on-unsaved-step.ts)', () => {
  it('does not bring the state back with the tokens, and the job is still retried', async () => {
    let stop: { arm(): void } | undefined;
    const h = await harness({
      answer: async () => [{ toolName: 'read_file', input: { path: 'README.md' } }],
      duringSandboxCall: async () => {
        // The toolbox goes as the stop deletes its sandbox; the stop's deletion of the state
        // lands after the job reads the state again to add what the try spent.
        stop!.arm();
        throw new Error('the toolbox connection was reset');
      },
    });
    stop = stopAfterNextLoad(h);
    const outcome = await h.step(0);
    expect(h.sandboxCalls.map((request) => request.tool)).toEqual(['read_file']);
    expect((outcome as Error).message).toContain('the toolbox connection was reset');
    await expectStateGone(h);
  });
});

describe('a budget stop before the model call, the run stopped while the step read what it needs', () => {
  const spentPastMaxTokens = (state: RunState) => {
    state.usage = { ...state.usage, inputTokens: 900, outputTokens: 100, totalTokens: 1000 };
  };

  it("spec.budget.maxTokens spent, the stop during the model's Secret read: no state saved back, no finalize queued", async () => {
    const h = await harness({ spec: { budget: { maxSteps: 20, maxTokens: 100, timeout: '30m' } } });
    await withState(h, spentPastMaxTokens);
    const model = h.deps.models;
    h.deps.models = async (...args) => {
      await stopDeletesState(h);
      return model(...args);
    };
    expect(await h.step(0)).toBe('done');
    await expectStateGone(h);
  });

  it("the namespace's tokens for the day spent, the stop during the tally's read: no state saved back, no finalize queued", async () => {
    const h = await harness();
    h.deps.teamBudget = {
      policies: { policyOf: async () => ({ tokensPerDay: 100, problems: [] }) },
      tally: {
        add: async () => 0,
        read: async () => {
          await stopDeletesState(h);
          return 1000;
        },
      },
    };
    expect(await h.step(0)).toBe('done');
    await expectStateGone(h);
  });

  it("the run still there: the stop is saved 'finalizing' with BudgetExceeded and finalize queued", async () => {
    const h = await harness({ spec: { budget: { maxSteps: 20, maxTokens: 100, timeout: '30m' } } });
    await withState(h, spentPastMaxTokens);
    expect(await h.step(0)).toBe('done');
    expect(await h.states.load(h.ref)).toMatchObject({ stage: 'finalizing', stop: { reason: 'BudgetExceeded' } });
    expect(h.enqueued).toEqual(['finalize']);
  });
});
