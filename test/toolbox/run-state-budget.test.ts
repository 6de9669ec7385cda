// What a run's saved state may take of the Redis every namespace shares (workers/run-state.ts),
// on a real redis-server: one run's state is bounded in bytes as stored, and one namespace's
// states together by config namespaceMaxStateBytes. Before, the bound counted characters (CJK
// text takes 3 bytes each) and nothing bounded a namespace: one namespace's runs filled the
// chart's Redis (maxmemory 256mb, noeviction) and every other namespace's runs failed on
// "OOM command not allowed".
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { emptyUsage } from '../../operator/src/agent/usage-accounting.ts';
import { RunStateStore, type RunState } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();

/** A run's state whose conversation is `text`. */
function state(namespace: string, name: string, text: string): RunState {
  return {
    version: 2,
    uid: `uid-${namespace}-${name}`,
    namespace,
    name,
    stage: 'stepping',
    step: 1,
    toolCalls: 0,
    messages: [{ role: 'user', content: text }],
    usage: emptyUsage(),
    filesTouched: { read: [], changed: [] },
    startedAt: 0,
  };
}

/** A store of its own (a fresh prefix) whose namespaces may each keep `budget` bytes of state. */
function store(budget: number, prefix = `budget-${randomUUID()}`): { states: RunStateStore; prefix: string } {
  return { states: new RunStateStore(server.redis, prefix, RunStateSeal.generated(), { namespaceMaxStateBytes: budget }), prefix };
}

const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  );

/** About 3 400 bytes as stored: 1 000 CJK characters (3 bytes each), the seal and the JSON around them. */
const CJK = '漢'.repeat(1_000);

describe("a namespace's saved states", () => {
  it('refuses the save that would take a namespace past its budget, BudgetExceeded naming the key, while another namespace saves', async () => {
    const { states, prefix } = store(12_000);
    for (const name of ['a', 'b', 'c']) await states.save(state('greedy', name, CJK));

    const failure = await failureOf(states.save(state('greedy', 'd', CJK)));
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('BudgetExceeded');
    expect((failure as Error).message).toMatch(
      /namespace greedy keep [0-9.]+ MiB .* namespaceMaxStateBytes of [0-9.]+ MiB \(12000 bytes\).*raise config\.namespaceMaxStateBytes/,
    );
    expect(await server.redis.exists(`${prefix}:run:uid-greedy-d`), 'the refused state is not written').toBe(0);
    await expect(states.create(state('greedy', 'e', CJK)), 'nor is a new run created').rejects.toThrow(/namespaceMaxStateBytes/);

    // Another namespace's budget is its own: its runs save as many.
    for (const name of ['a', 'b', 'c']) await states.save(state('other', name, CJK));
    await expect(states.save(state('other', 'd', CJK))).rejects.toThrow(/namespace other/);
  });

  it("counts a state's bytes as stored (CJK: 3 a character), and frees them when the state is deleted", async () => {
    const { states, prefix } = store(12_000);
    const first = state('team', 'a', CJK);
    await states.save(first);
    const stored = await server.redis.get(`${prefix}:run:${first.uid}`);
    expect(Number(await server.redis.hget(`${prefix}:state-bytes:team`, first.uid))).toBe(Buffer.byteLength(stored ?? ''));
    expect(Buffer.byteLength(stored ?? '')).toBeGreaterThan(3_000);

    await states.save(state('team', 'b', CJK));
    await states.save(state('team', 'c', CJK));
    await expect(states.save(state('team', 'd', CJK))).rejects.toThrow(/namespaceMaxStateBytes/);

    await states.delete(first);
    expect(await server.redis.exists(`${prefix}:run:${first.uid}`)).toBe(0);
    expect(await server.redis.hexists(`${prefix}:state-bytes:team`, first.uid)).toBe(0);
    await states.save(state('team', 'd', CJK));
  });

  it('does not count a run whose state went without its tally entry (deleted by a replica of the release before)', async () => {
    const { states, prefix } = store(12_000);
    for (const name of ['a', 'b', 'c']) await states.save(state('team', name, CJK));
    // What the release before did to delete a state: DEL, its tally untouched.
    await server.redis.del(`${prefix}:run:uid-team-a`);
    await states.save(state('team', 'd', CJK));
    expect((await server.redis.hkeys(`${prefix}:state-bytes:team`)).sort()).toEqual(['uid-team-b', 'uid-team-c', 'uid-team-d']);
    // The runs still there hold their bytes.
    await expect(states.save(state('team', 'e', CJK))).rejects.toThrow(/namespaceMaxStateBytes/);
  });

  it("counts a run's last save, not each: a run saved again takes its new size, and one that does not grow is never refused", async () => {
    const { states, prefix } = store(12_000);
    const run = state('team', 'a', CJK);
    for (let save = 0; save < 5; save++) await states.save(run);
    await states.save(state('team', 'b', CJK));
    // A budget lowered under what the namespace holds: the runs still save what does not grow.
    const lowered = new RunStateStore(server.redis, prefix, RunStateSeal.generated(), { namespaceMaxStateBytes: 4_000 });
    await lowered.save(run);
    await lowered.save({ ...run, messages: [{ role: 'user', content: 'done' }] });
    await expect(lowered.save(state('team', 'b', CJK + CJK))).rejects.toThrow(/namespaceMaxStateBytes/);
    expect(await server.redis.get(`${prefix}:run:uid-team-b`)).toContain(CJK);
  });

  it('lets saves made at once pass the budget no further than one after another', async () => {
    const { states } = store(12_000);
    const results = await Promise.allSettled(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((name) => states.save(state('team', name, CJK))));
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(3);
  });

  it('creates a state only once, its size counted once', async () => {
    const { states, prefix } = store(12_000);
    const run = state('team', 'a', CJK);
    expect(await states.create(run)).toBe(true);
    expect(await states.create({ ...run, step: 7 })).toBe(false);
    expect(await server.redis.hlen(`${prefix}:state-bytes:team`)).toBe(1);
    expect((await states.load(run))?.step).toBe(1);
  });
});

describe("one run's saved state", () => {
  it('is bounded in bytes as stored: a CJK conversation under 24 Mi characters but over 24 MiB fails BudgetExceeded, unwritten', async () => {
    const { states, prefix } = store(1024 ** 3);
    const run = state('team', 'cjk', '漢'.repeat(9 * 1024 * 1024));
    expect(JSON.stringify(run).length).toBeLessThan(24 * 1024 * 1024);
    const failure = await failureOf(states.save(run));
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('BudgetExceeded');
    expect((failure as Error).message).toMatch(/saved conversation reached 27\.\d MiB, over the 24\.0 MiB/);
    expect(await server.redis.exists(`${prefix}:run:${run.uid}`)).toBe(0);
  });
});
