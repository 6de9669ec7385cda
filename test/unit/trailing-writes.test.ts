// This process's trailing step records (workers/trailing-record.ts): the next job learns
// whether they landed (from this process's own writes, or from the mark another replica
// left) and sends them again when they did not. The step/resume table
// (test/toolbox/step-state-machine.test.ts) runs the whole path, with the marks in Redis.
import { describe, expect, it } from 'vitest';
import { TrailingWrites } from '../../operator/src/workers/trailing-record.ts';

const settable = () => {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
};

/** Marks as a plain set, shared by the "replicas" of a test. */
const memoryMarks = () => {
  const landed = new Set<string>();
  return {
    landed: async (uid: string, step: number) => landed.has(`${uid}/${step}`),
    mark: async (uid: string, step: number) => void landed.add(`${uid}/${step}`),
  };
};

describe('TrailingWrites', () => {
  it('marks writes that landed for the other replicas, and never writes that failed', async () => {
    const marks = memoryMarks();
    const here = new TrailingWrites(marks);
    const there = new TrailingWrites(marks);
    here.start('uid-a', 1, () => Promise.resolve(true));
    here.start('uid-b', 1, () => Promise.reject(new Error('API server unreachable')));
    // Landed, but the run was no longer Running (deleted: its keys are gone and stay gone).
    here.start('uid-c', 1, () => Promise.resolve(false));
    await here.drain();
    expect(await there.landed('uid-a', 1)).toBe(true);
    expect(await there.landed('uid-b', 1)).toBe(false);
    expect(await there.landed('uid-c', 1)).toBe(false);
    expect(await there.landed('uid-a', 2)).toBe(false);
  });

  it('starts the writes at once and tells the next job, once, that they landed', async () => {
    const writes = new TrailingWrites();
    let started = 0;
    const sent = settable();
    writes.start('uid-a', 3, () => {
      started += 1;
      return sent.promise.then(() => true);
    });
    expect(started).toBe(1);
    const taken = writes.landed('uid-a', 3);
    sent.resolve();
    expect(await taken).toBe(true);
    // Taken: a second job (a retry) finds nothing of this process's and sends them itself.
    expect(await writes.landed('uid-a', 3)).toBe(false);
  });

  it('says false for writes that failed, and for another run or step', async () => {
    const writes = new TrailingWrites();
    writes.start('uid-a', 1, () => Promise.reject(new Error('API server unreachable')));
    writes.start('uid-b', 1, () => Promise.resolve(true));
    expect(await writes.landed('uid-a', 2)).toBe(false);
    expect(await writes.landed('uid-c', 1)).toBe(false);
    expect(await writes.landed('uid-a', 1)).toBe(false);
    expect(await writes.landed('uid-b', 1)).toBe(true);
  });

  it('hands writes still on their way to the job that chains behind them, once; ended ones it leaves to landed', async () => {
    const marks = memoryMarks();
    const writes = new TrailingWrites(marks);
    const slow = settable();
    writes.start('uid-a', 1, () => slow.promise.then(() => true));
    writes.start('uid-b', 1, () => Promise.reject(new Error('API server unreachable')));
    writes.start('uid-c', 1, () => Promise.resolve(true));
    await new Promise((resolve) => setImmediate(resolve));
    const taken = writes.onItsWay('uid-a', 1);
    expect(taken).toBeInstanceOf(Promise);
    // Taken: nobody else settles them, and this process no longer answers for them itself.
    expect(writes.onItsWay('uid-a', 1)).toBeUndefined();
    slow.resolve();
    expect(await taken).toBe(true);
    expect(await writes.landed('uid-a', 1)).toBe(true); // from the mark
    // Ended (failed or landed): nothing to chain behind; landed() answers at once.
    expect(writes.onItsWay('uid-b', 1)).toBeUndefined();
    expect(writes.onItsWay('uid-c', 1)).toBeUndefined();
    expect(writes.onItsWay('uid-d', 1)).toBeUndefined();
    expect(await writes.landed('uid-b', 1)).toBe(false);
    expect(await writes.landed('uid-c', 1)).toBe(true);
  });

  it('says false to the chained job when the writes it took failed', async () => {
    const writes = new TrailingWrites();
    const slow = settable();
    writes.start('uid-a', 1, () => slow.promise.then(() => true));
    const taken = writes.onItsWay('uid-a', 1)!;
    slow.reject(new Error('API server unreachable'));
    expect(await taken).toBe(false);
  });

  it('drops records no job took once they are older than its bound', async () => {
    let now = 0;
    const writes = new TrailingWrites(undefined, () => now, 1_000);
    writes.start('ended-run', 1, () => Promise.resolve(true));
    now = 1_001;
    writes.start('live-run', 1, () => Promise.resolve(true));
    expect(writes.size).toBe(1);
    expect(await writes.landed('ended-run', 1)).toBe(false);
    expect(await writes.landed('live-run', 1)).toBe(true);
  });

  it('drains on shutdown: waits for writes on their way, not past its bound', async () => {
    const writes = new TrailingWrites();
    const slow = settable();
    let landed = false;
    writes.start('uid-a', 1, () => slow.promise.then(() => (landed = true)));
    const drained = writes.drain(5_000);
    slow.resolve();
    await drained;
    expect(landed).toBe(true);

    const never = new TrailingWrites();
    never.start('uid-b', 1, () => new Promise<boolean>(() => undefined));
    const before = Date.now();
    await never.drain(50);
    expect(Date.now() - before).toBeGreaterThanOrEqual(45);
  });
});
