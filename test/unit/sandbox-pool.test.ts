// The sandbox pool keeps a run's sandbox for its jobs in this process, and drops it when nothing
// has used it for a while: a replica that ran some steps of a run but neither ended it nor leads
// never releases it otherwise (each kept a session and ~11 KiB of heap per such run). A dropped
// entry opens again on its next use, also through a handle a job still holds.
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { Sandbox, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';

const IDLE_MS = 10 * 60_000;
const run = (uid: string) => ({ metadata: { uid, namespace: 'team', name: `run-${uid}` } }) as ParsedCodingRun;

/** Sandboxes that record their closing; `hold` keeps calls open until released. */
function recordingFactory() {
  const made: Array<{ uid: string; closed: boolean }> = [];
  const holds: Array<() => void> = [];
  const create = (forRun: ParsedCodingRun): Sandbox => {
    const record = { uid: forRun.metadata.uid, closed: false };
    made.push(record);
    return {
      call: async (request) => {
        if (record.closed) throw new Error('called a closed sandbox');
        if (request.tool === 'bash') await new Promise<void>((resolve) => holds.push(resolve));
        return { ok: true, result: { uid: record.uid } } as ToolResponse;
      },
      importTree: async () => undefined,
      close: async () => void (record.closed = true),
    };
  };
  return { create, made, releaseHolds: () => holds.splice(0).forEach((resolve) => resolve()) };
}

function poolAt(create: (forRun: ParsedCodingRun) => Sandbox) {
  const clock = { now: 1_000_000 };
  const pool = new SandboxPool(create, { idleMs: IDLE_MS, sweepIntervalMs: 0, now: () => clock.now });
  return { pool, clock };
}

describe('the sandbox pool', () => {
  it('closes and drops entries used once and then idle past the bound, and keeps the one in use', async () => {
    const { create, made, releaseHolds } = recordingFactory();
    const { pool, clock } = poolAt(create);
    for (const uid of ['a', 'b']) await pool.for(run(uid)).call({ tool: 'read_file', input: {} });
    const long = pool.for(run('c')).call({ tool: 'bash', input: {} }); // a bash of half an hour
    clock.now += IDLE_MS - 1;
    expect(await pool.sweep()).toBe(0);
    clock.now += 2;
    expect(await pool.sweep()).toBe(2);
    expect(made.map(({ uid, closed }) => [uid, closed])).toEqual([
      ['a', true],
      ['b', true],
      ['c', false],
    ]);
    expect(pool.size).toBe(1);
    releaseHolds();
    await long;
    // Idle from the end of its call on, not from its start.
    expect(await pool.sweep()).toBe(0);
    clock.now += IDLE_MS + 1;
    expect(await pool.sweep()).toBe(1);
    expect(pool.size).toBe(0);
  });

  it('opens a dropped entry again on its next use, through the handle a job still holds, once', async () => {
    const { create, made } = recordingFactory();
    const { pool, clock } = poolAt(create);
    const held = pool.for(run('a'));
    await held.call({ tool: 'read_file', input: {} });
    clock.now += IDLE_MS + 1;
    await pool.sweep();
    expect(await held.call({ tool: 'read_file', input: {} })).toEqual({ ok: true, result: { uid: 'a' } });
    expect(await pool.for(run('a')).call({ tool: 'read_file', input: {} })).toEqual({ ok: true, result: { uid: 'a' } });
    expect(made.map(({ closed }) => closed)).toEqual([true, false]);
    expect(pool.size).toBe(1);
  });

  it('fails a handle of a released run with CLOSED rather than opening it again', async () => {
    const { create, made } = recordingFactory();
    const { pool } = poolAt(create);
    const held = pool.for(run('a'));
    await pool.release('a');
    await expect(held.call({ tool: 'read_file', input: {} })).rejects.toMatchObject({ name: 'SandboxError', reason: 'CLOSED' });
    expect(made).toEqual([{ uid: 'a', closed: true }]);
  });

  it('fails a handle of a released run with CLOSED also when a sweep had dropped its entry', async () => {
    const { create, made } = recordingFactory();
    const { pool, clock } = poolAt(create);
    const held = pool.for(run('a')); // a job keeps its handle across a long model call
    await held.call({ tool: 'read_file', input: {} });
    clock.now += IDLE_MS + 1;
    expect(await pool.sweep()).toBe(1);
    await pool.release('a'); // the run ends
    await expect(held.call({ tool: 'read_file', input: {} })).rejects.toMatchObject({ name: 'SandboxError', reason: 'CLOSED' });
    expect(pool.size).toBe(0);
    expect(made).toEqual([{ uid: 'a', closed: true }]);
    // A handle made after the release (a later job of the run) still opens its sandbox.
    expect(await pool.for(run('a')).call({ tool: 'read_file', input: {} })).toEqual({ ok: true, result: { uid: 'a' } });
  });

  it('sweeps on its own timer, which closeAll stops', async () => {
    const { create, made } = recordingFactory();
    const pool = new SandboxPool(create, { idleMs: 0, sweepIntervalMs: 10 });
    await pool.for(run('a')).call({ tool: 'read_file', input: {} });
    while (pool.size > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(made[0]!.closed).toBe(true);
    await pool.closeAll();
  });
});
