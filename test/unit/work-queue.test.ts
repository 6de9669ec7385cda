import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../operator/src/controller/work-queue.ts';

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('never processes one key twice at once, and runs it again if it was added meanwhile', async () => {
    const gate = deferred();
    let concurrent = 0;
    let maxConcurrent = 0;
    const seen: string[] = [];
    const queue = new WorkQueue(
      async (key) => {
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        seen.push(key);
        if (seen.length === 1) await gate.promise;
        concurrent--;
      },
      { concurrency: 4 },
    );
    queue.add('a');
    await tick();
    queue.add('a');
    queue.add('a');
    await tick();
    expect(seen).toEqual(['a']);
    gate.resolve();
    await queue.idle();
    await tick();
    await queue.idle();
    expect(seen).toEqual(['a', 'a']);
    expect(maxConcurrent).toBe(1);
  });

  it('processes different keys in parallel up to the concurrency', async () => {
    const gate = deferred();
    let concurrent = 0;
    let maxConcurrent = 0;
    const queue = new WorkQueue(
      async () => {
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        await gate.promise;
        concurrent--;
      },
      { concurrency: 2 },
    );
    for (const key of ['a', 'b', 'c', 'd']) queue.add(key);
    await tick();
    expect(concurrent).toBe(2);
    gate.resolve();
    await queue.idle();
    expect(maxConcurrent).toBe(2);
  });

  it('backs off exponentially per key on failure and resets after a success', async () => {
    const delays: number[] = [];
    const timers: Array<() => void> = [];
    let failuresLeft = 3;
    const queue = new WorkQueue(
      async () => {
        if (failuresLeft-- > 0) throw new Error('boom');
      },
      {
        concurrency: 1,
        baseDelayMs: 100,
        maxDelayMs: 250,
        setTimer: (callback, ms) => {
          delays.push(ms);
          timers.push(callback);
          return {};
        },
        clearTimer: () => {},
      },
    );
    queue.add('k');
    for (let i = 0; i < 3; i++) {
      await queue.idle();
      await tick();
      timers.shift()!();
    }
    await queue.idle();
    expect(delays).toEqual([100, 200, 250]);
  });

  it('holds keys until start() when made held, then processes each once', async () => {
    const seen: string[] = [];
    const queue = new WorkQueue(
      async (key) => {
        seen.push(key);
      },
      { concurrency: 2, held: true },
    );
    queue.add('a');
    queue.add('b');
    queue.add('a');
    await tick();
    expect(seen).toEqual([]);
    queue.start();
    await queue.idle();
    expect(seen).toEqual(['a', 'b']);
  });

  /** The delays a queue sets its timers for, after processing one key that asks to be requeued after `ms`. */
  async function requeueDelays(ms: number): Promise<number[]> {
    const delays: number[] = [];
    const queue = new WorkQueue(async () => ({ requeueAfterMs: ms }), {
      concurrency: 1,
      setTimer: (_, delay) => {
        delays.push(delay);
        return {};
      },
      clearTimer: () => {},
    });
    queue.add('k');
    await queue.idle();
    await tick();
    return delays;
  }

  it('re-adds a key after requeueAfter', async () => {
    expect(await requeueDelays(5000)).toEqual([5000]);
  });

  it("sets a requeue longer than a timer can wait (a run's 30-day TTL) for the longest wait, which Node would take for 1 ms", async () => {
    expect(await requeueDelays(30 * 24 * 3600 * 1000)).toEqual([2 ** 31 - 1]);
  });

  it("drops a key's pending delay when its object is gone (processed with forget), and keeps others'", async () => {
    const gone = new Set<string>();
    const cleared: unknown[] = [];
    let timers = 0;
    const queue = new WorkQueue(async (key) => (gone.has(key) ? { forget: true } : { requeueAfterMs: 365 * 24 * 3600 * 1000 }), {
      concurrency: 2,
      setTimer: () => ({ id: ++timers }),
      clearTimer: (timer) => void cleared.push(timer),
    });
    queue.add('ns/a');
    queue.add('ns/b');
    await queue.idle();
    expect(queue.delayedCount).toBe(2);
    // ns/a is deleted: its watch event brings the key once more.
    gone.add('ns/a');
    queue.add('ns/a');
    await queue.idle();
    expect(queue.delayedCount).toBe(1);
    expect(cleared).toEqual([{ id: 1 }]);
  });
});
