// The leader's sweep of run states whose run is gone (controller/orphaned-state-sweep.ts), over
// states and a cache held in memory: when it stops a run, with what, and what it leaves. The
// same sweep on a real Redis: test/toolbox/orphaned-state-sweep.test.ts.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { StateOwner, StateRunRef } from '../../operator/src/controller/orphaned-run-states.ts';
import { OrphanedStateSweep, type OrphanedStateSweepDeps } from '../../operator/src/controller/orphaned-state-sweep.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const GRACE = 60_000;

/** States in memory: uid → whose (a ref, or why it cannot be read); `reads` counts ownerOf calls. */
function memoryStates(entries: Array<[string, StateOwner]>) {
  const states = new Map(entries);
  const reads: string[] = [];
  return {
    states,
    reads,
    port: {
      uids: async () => [...states.keys()],
      ownerOf: async (uid: string) => {
        reads.push(uid);
        return states.get(uid);
      },
    },
  };
}

const ref = (uid: string, namespace = 'team', name = `run-${uid}`): StateRunRef => ({ uid, namespace, name });

function sweepOver(
  states: ReturnType<typeof memoryStates>,
  options: { runs?: CodingRun[]; watchNamespaces?: string[]; stop?: (run: CodingRun) => Promise<number> } = {},
) {
  let now = 0;
  const stopped: CodingRun[] = [];
  const logs: Array<{ level: string; fields: object; message: string }> = [];
  const swept = { count: 0 };
  const runs = new MemoryCache<CodingRun>(options.runs ?? []);
  const deps: OrphanedStateSweepDeps = {
    states: states.port,
    runs,
    agent: {
      async stop(run) {
        const left = options.stop ? await options.stop(run) : 0;
        stopped.push(run);
        // What agent.stop does to Redis: the state goes.
        states.states.delete(run.metadata.uid);
        return left;
      },
    },
    watchNamespaces: options.watchNamespaces ?? [],
    logger: {
      info: (fields, message) => logs.push({ level: 'info', fields, message }),
      warn: (fields, message) => logs.push({ level: 'warn', fields, message }),
    },
    metrics: { orphanedRunStatesSwept: { inc: () => void swept.count++ } } as OrphanedStateSweepDeps['metrics'],
    now: () => now,
    graceMs: GRACE,
  };
  return {
    deps,
    sweep: new OrphanedStateSweep(deps),
    runs,
    stopped,
    logs,
    swept,
    advance: (ms: number) => void (now += ms),
  };
}

const liveRun = (uid: string, namespace = 'team') => codingRunFixture({ metadata: { uid, namespace, name: `run-${uid}` } });

describe('the sweep of run states whose run is gone', () => {
  it('stops the run of a state found without a run by two sweeps the grace apart, by the identity its state records, and keeps one whose run lives', async () => {
    const states = memoryStates([
      ['gone', { ref: ref('gone', 'team-a', 'fix-tests') }],
      ['live', { ref: ref('live') }],
    ]);
    const world = sweepOver(states, { runs: [liveRun('live')] });
    expect(await world.sweep.sweep()).toEqual([]);
    world.advance(GRACE - 1);
    expect(await world.sweep.sweep(), 'not before the grace is over').toEqual([]);
    world.advance(1);
    expect(await world.sweep.sweep()).toEqual(['gone']);
    expect(world.stopped.map((run) => run.metadata)).toEqual([{ uid: 'gone', namespace: 'team-a', name: 'fix-tests' }]);
    expect(world.stopped[0]!.status, 'no status: stop takes the steps from the state').toBeUndefined();
    expect(states.states.has('live')).toBe(true);
    expect(world.swept.count).toBe(1);
    expect(world.logs).toEqual([
      {
        level: 'info',
        fields: { namespace: 'team-a', name: 'fix-tests', uid: 'gone', jobsRunning: 0 },
        message: expect.stringContaining('stopped the agent of a run deleted while no operator watched it'),
      },
    ]);
    // Stopped once: its state is gone.
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual([]);
    expect(world.stopped).toHaveLength(1);
  });

  it('never stops a state whose run the cache shows, even one first seen without (the cache lagged its create)', async () => {
    const states = memoryStates([['late', { ref: ref('late') }]]);
    const world = sweepOver(states);
    await world.sweep.sweep();
    world.runs.put(liveRun('late'));
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual([]);
    // Gone from the cache again now: the grace starts over.
    world.runs.remove('team', 'run-late');
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual([]);
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual(['late']);
  });

  it('leaves a state of a run in a namespace it does not watch, and one it cannot read (warned once), and reads neither again', async () => {
    const states = memoryStates([
      ['elsewhere', { ref: ref('elsewhere', 'not-watched') }],
      ['forged', { invalid: "its HMAC does not match (written without this operator's stateKey)" }],
      ['ours', { ref: ref('ours', 'watched') }],
    ]);
    const world = sweepOver(states, { watchNamespaces: ['watched'] });
    await world.sweep.sweep();
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual(['ours']);
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual([]);
    expect(states.reads.sort()).toEqual(['elsewhere', 'forged', 'ours']);
    expect(states.states.has('elsewhere') && states.states.has('forged')).toBe(true);
    expect(world.logs.filter((log) => log.level === 'warn')).toEqual([
      {
        level: 'warn',
        fields: { uid: 'forged', problem: expect.stringContaining('HMAC') },
        message: expect.stringContaining('cannot be read'),
      },
    ]);
  });

  it('leaves a state of a run in a watched namespace the cache has not listed (its lists refused), and stops it once listed without it', async () => {
    const states = memoryStates([
      ['refused', { ref: ref('refused', 'team-b') }],
      ['gone', { ref: ref('gone', 'team-a') }],
    ]);
    const world = sweepOver(states, { watchNamespaces: ['team-a', 'team-b'] });
    let teamBListed = false;
    world.deps.listed = (namespace) => namespace !== 'team-b' || teamBListed;
    await world.sweep.sweep();
    world.advance(GRACE);
    expect(await world.sweep.sweep(), "team-b's runs are not in the cache: its state may belong to one").toEqual(['gone']);
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual([]);
    expect(states.states.has('refused')).toBe(true);
    teamBListed = true;
    world.advance(GRACE);
    expect(await world.sweep.sweep(), 'listed, and its run not there').toEqual(['refused']);
  });

  it('reads the state of a run in a namespace that has not listed once, not at every sweep while it stays so, and again once it has', async () => {
    const states = memoryStates([['refused', { ref: ref('refused', 'team-b') }]]);
    const world = sweepOver(states, { watchNamespaces: ['team-a', 'team-b'] });
    let teamBListed = false;
    world.deps.listed = (namespace) => namespace !== 'team-b' || teamBListed;
    await world.sweep.sweep();
    for (let sweep = 0; sweep < 3; sweep++) {
      world.advance(GRACE);
      expect(await world.sweep.sweep()).toEqual([]);
    }
    expect(states.reads, 'a state may be 24 MiB').toEqual(['refused']);
    teamBListed = true;
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual(['refused']);
    expect(states.reads).toEqual(['refused', 'refused']);
  });

  it('stops nothing of a run the cache shows by the name its state gives since the listing', async () => {
    const states = memoryStates([['racing', { ref: ref('racing') }]]);
    const world = sweepOver(states);
    await world.sweep.sweep();
    world.advance(GRACE);
    // Listed without a run, then the run arrives before it is read.
    const { port } = states;
    const ownerOf = port.ownerOf;
    port.ownerOf = async (uid) => {
      world.runs.put(liveRun('racing'));
      return ownerOf(uid);
    };
    expect(await world.sweep.sweep()).toEqual([]);
    expect(world.stopped).toEqual([]);
  });

  it('ends the sweep at a stop that fails, and stops that run at the next sweep without waiting the grace again', async () => {
    const states = memoryStates([
      ['a', { ref: ref('a') }],
      ['b', { ref: ref('b') }],
    ]);
    let failing = true;
    const world = sweepOver(states, {
      stop: async () => {
        if (failing) throw new Error('stopping the agent: no answer from Redis within 10000 ms');
        return 0;
      },
    });
    await world.sweep.sweep();
    world.advance(GRACE);
    await expect(world.sweep.sweep()).rejects.toThrow('no answer from Redis');
    expect(states.reads, 'b is not read after a failed').toEqual(['a']);
    failing = false;
    world.advance(1);
    expect(await world.sweep.sweep()).toEqual(['a', 'b']);
  });

  it('says how many jobs of a stopped run still run, and stops it again when its state comes back', async () => {
    const states = memoryStates([['busy', { ref: ref('busy') }]]);
    const world = sweepOver(states, { stop: async () => 2 });
    await world.sweep.sweep();
    world.advance(GRACE);
    expect(await world.sweep.sweep()).toEqual(['busy']);
    expect(world.logs[0]).toMatchObject({
      fields: { uid: 'busy', jobsRunning: 2 },
      message: expect.stringContaining('2 of its jobs still run'),
    });
    // The running job saved the state again as it ended.
    states.states.set('busy', { ref: ref('busy') });
    world.advance(1);
    expect(await world.sweep.sweep()).toEqual(['busy']);
  });

  describe('on a timer', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('sweeps once started, again after the grace, then every interval, and no more once stopped', async () => {
      vi.useFakeTimers();
      const states = memoryStates([['gone', { ref: ref('gone') }]]);
      let listings = 0;
      const uids = states.port.uids;
      states.port.uids = async () => {
        listings++;
        return uids();
      };
      const world = sweepOver(states);
      const sweep = new OrphanedStateSweep({
        ...world.deps,
        now: () => Date.now(),
        intervalMs: 10 * GRACE,
      });
      sweep.start();
      await vi.advanceTimersByTimeAsync(0);
      expect(listings).toBe(1);
      await vi.advanceTimersByTimeAsync(GRACE);
      expect(listings).toBe(2);
      expect(
        world.stopped.map((run) => run.metadata.uid),
        'stopped by the sweep after the grace',
      ).toEqual(['gone']);
      await vi.advanceTimersByTimeAsync(10 * GRACE - 1);
      expect(listings).toBe(2);
      await vi.advanceTimersByTimeAsync(1);
      expect(listings).toBe(3);
      sweep.stop();
      await vi.advanceTimersByTimeAsync(100 * GRACE);
      expect(listings).toBe(3);
    });
  });
});
