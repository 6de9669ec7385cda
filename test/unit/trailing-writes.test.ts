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

  it('says a record is on its way while its writes go out or wait, and not once they ended', async () => {
    const writes = new TrailingWrites();
    const slow = settable();
    writes.start('uid-a', 1, () => slow.promise.then(() => true));
    expect(writes.onItsWay('uid-a', 1)).toBe(true);
    // Only the run's newest record, and only this process's.
    expect(writes.onItsWay('uid-a', 0)).toBe(false);
    expect(writes.onItsWay('uid-b', 1)).toBe(false);
    writes.start('uid-a', 2, () => Promise.resolve(true));
    expect(writes.onItsWay('uid-a', 1)).toBe(false);
    expect(writes.onItsWay('uid-a', 2)).toBe(true);
    slow.resolve();
    await writes.drain();
    expect(writes.onItsWay('uid-a', 2)).toBe(false);
  });

  it('sends a record behind the writes on its way, told which entries landed; one waiting is taken over by a newer one', async () => {
    const marks = memoryMarks();
    const writes = new TrailingWrites(marks);
    const first = settable();
    const sent: Array<{ step: number; landed: string[] }> = [];
    const record = (step: number, wait?: Promise<void>) => async (landed: ReadonlySet<string>) => {
      sent.push({ step, landed: [...landed] });
      await wait;
      return true;
    };
    writes.start('uid-a', 1, record(1, first.promise), ['s000001']);
    writes.start('uid-a', 2, record(2), ['s000001', 's000002']);
    writes.start('uid-a', 3, record(3), ['s000001', 's000002', 's000003']);
    expect(sent).toEqual([{ step: 1, landed: [] }]);
    first.resolve();
    expect(await writes.landed('uid-a', 3)).toBe(true);
    // Step 2's record never went out: step 3's carried it.
    expect(sent).toEqual([
      { step: 1, landed: [] },
      { step: 3, landed: ['s000001'] },
    ]);
    expect(await new TrailingWrites(marks).landed('uid-a', 3)).toBe(true);
  });

  it('tells the record behind that nothing landed when the writes ahead failed', async () => {
    const writes = new TrailingWrites();
    const first = settable();
    let told: string[] | undefined;
    writes.start('uid-a', 1, () => first.promise.then(() => true), ['s000001']);
    writes.start(
      'uid-a',
      2,
      async (landed) => {
        told = [...landed];
        return true;
      },
      ['s000001', 's000002'],
    );
    first.reject(new Error('API server unreachable'));
    expect(await writes.landed('uid-a', 2)).toBe(true);
    expect(told).toEqual([]);
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
