// Lease logic with an in-memory store that behaves like the API server's optimistic
// concurrency (a stale resourceVersion gets 409).
import type { V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { LeaderElector, type LeaseStore } from '../../operator/src/controller/leader-election.ts';

function memoryStore(): LeaseStore & { lease?: V1Lease } {
  let version = 0;
  const store: LeaseStore & { lease?: V1Lease } = {
    async get() {
      return store.lease ? structuredClone(store.lease) : undefined;
    },
    async create(lease) {
      if (store.lease) throw Object.assign(new Error('exists'), { code: 409, body: 'AlreadyExists' });
      store.lease = { ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } };
      return structuredClone(store.lease);
    },
    async replace(lease) {
      if (lease.metadata?.resourceVersion !== store.lease?.metadata?.resourceVersion)
        throw Object.assign(new Error('conflict'), { code: 409 });
      store.lease = { ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } };
      return structuredClone(store.lease);
    },
  };
  return store;
}

const options = (identity: string) => ({
  namespace: 'ns',
  leaseName: 'op',
  identity,
  leaseDurationSeconds: 15,
  renewDeadlineSeconds: 10,
  retryPeriodSeconds: 2,
});
const logger = { info() {}, warn() {} };

/**
 * An elector whose wall clock reads `wall()` and whose monotonic clock reads `monotonic()` (by
 * default the same): replicas' wall clocks may be any distance apart, and only the monotonic
 * one may decide anything.
 */
function elector(
  store: LeaseStore,
  identity: string,
  wall: () => number,
  sleep?: (ms: number) => Promise<void>,
  monotonic: () => number = wall,
): LeaderElector {
  return new LeaderElector(store, options(identity), logger, () => new Date(wall()), sleep, monotonic);
}

describe('LeaderElector', () => {
  it('lets exactly one of two candidates lead while the lease is fresh', async () => {
    const store = memoryStore();
    let time = 0;
    const a = elector(store, 'a', () => time);
    const b = elector(store, 'b', () => time);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 14_000;
    expect(await b.tryAcquireOrRenew()).toBe(false);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(store.lease!.spec!.holderIdentity).toBe('a');
  });

  it('hands over when the leader stops renewing for the lease duration', async () => {
    const store = memoryStore();
    let time = 0;
    const a = elector(store, 'a', () => time);
    const b = elector(store, 'b', () => time);
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 15_001;
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(store.lease!.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it("counts the lease duration from when it saw the lease change, not from the holder's clock (a standby 13 s ahead)", async () => {
    const store = memoryStore();
    let time = 0;
    const a = elector(store, 'a', () => time);
    const b = elector(store, 'b', () => time + 13_000);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    // a renews every retry period; b looks as often. By b's clock a's renewTime is 13 s old at once.
    for (let tick = 0; tick < 20; tick++) {
      time += 2_000;
      expect(await b.tryAcquireOrRenew(), `b at ${time} ms`).toBe(false);
      expect(await a.tryAcquireOrRenew()).toBe(true);
    }
    // a stops renewing: b sees its last renew, and takes over one lease duration after that.
    time += 2_000;
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 13_000;
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 2_000;
    expect(await b.tryAcquireOrRenew()).toBe(true);
  });

  it('takes nothing from a leader still renewing whose wall clock runs 31 s behind (two lease durations)', async () => {
    const store = memoryStore();
    let time = 1_000_000;
    const a = elector(store, 'a', () => time);
    // b's wall clock is 31 s ahead of a's; its monotonic clock counts from its own boot.
    const b = elector(
      store,
      'b',
      () => time + 31_000,
      undefined,
      () => time - 900_000,
    );
    expect(await a.tryAcquireOrRenew()).toBe(true);
    time += 2_000;
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(await b.tryAcquireOrRenew(), "a renewed 0 s ago, 33 s ago by b's clock").toBe(false);
    for (let tick = 0; tick < 10; tick++) {
      time += 2_000;
      expect(await a.tryAcquireOrRenew()).toBe(true);
      expect(await b.tryAcquireOrRenew(), `b at ${time} ms`).toBe(false);
    }
    expect(store.lease!.spec!.holderIdentity).toBe('a');
  });

  it('waits one lease duration from its first look at a lease its holder left, however old its renewTime (as client-go)', async () => {
    const store = memoryStore();
    let time = 0;
    await elector(store, 'gone', () => time).tryAcquireOrRenew();
    // A standby started long after: the renewTime is 10 minutes old by its clock, which may be wrong by as much.
    time += 600_000;
    const b = elector(store, 'b', () => time);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 14_000;
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 1_000;
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(store.lease!.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it('measures the lease on its monotonic clock: a wall clock stepped an hour ahead takes nothing early', async () => {
    const store = memoryStore();
    let time = 0;
    let wallStep = 0;
    const a = elector(store, 'a', () => time);
    const b = elector(
      store,
      'b',
      () => time + wallStep,
      undefined,
      () => time,
    );
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBe(false);
    // NTP steps b's wall clock; a stops renewing.
    wallStep = 3_600_000;
    time += 14_000;
    expect(await b.tryAcquireOrRenew()).toBe(false);
    time += 1_000;
    expect(await b.tryAcquireOrRenew()).toBe(true);
  });

  it('stops leading when renewals fail past the renew deadline, and leads again once they work', async () => {
    const store = memoryStore();
    let failing = false;
    const flaky: LeaseStore = {
      get: () => (failing ? Promise.reject(new Error('connect ECONNREFUSED')) : store.get()),
      create: (lease) => store.create(lease),
      replace: (lease) => (failing ? Promise.reject(new Error('connect ECONNREFUSED')) : store.replace(lease)),
    };
    let time = 0;
    const sleep = async (ms: number) => {
      time += ms;
      await new Promise((resolve) => setTimeout(resolve, 0));
    };
    const a = elector(flaky, 'a', () => time, sleep);
    const terms: string[] = [];
    const first = a.run(
      async () => void terms.push('started'),
      () => void terms.push('stopped'),
    );
    while (terms.length === 0) await new Promise((resolve) => setTimeout(resolve, 0));
    failing = true;
    await first;
    expect(terms).toEqual(['started', 'stopped']);
    expect(a.isLeader).toBe(false);
    // The renew deadline (10 s) passed before the lease (15 s) could expire for others.
    expect(time).toBeGreaterThan(10_000);
    expect(time).toBeLessThan(15_000);
    failing = false;
    const second = a.run(
      async () => void terms.push('started again'),
      () => {},
    );
    while (terms.length < 3) await new Promise((resolve) => setTimeout(resolve, 0));
    expect(a.isLeader).toBe(true);
    await a.release();
    await second;
    expect(terms).toEqual(['started', 'stopped', 'started again']);
  });

  it('stops leading at the renew deadline when a renew hangs, before the lease can expire for others', async () => {
    const store = memoryStore();
    let hanging = false;
    const stalled: LeaseStore = {
      // A stalled connection: the read is sent and never answered.
      get: () => (hanging ? new Promise<never>(() => {}) : store.get()),
      create: (lease) => store.create(lease),
      replace: (lease) => store.replace(lease),
    };
    let time = 0;
    const sleep = async (ms: number) => {
      time += ms;
      await new Promise((resolve) => setTimeout(resolve, 0));
    };
    const a = elector(stalled, 'a', () => time, sleep);
    const terms: string[] = [];
    const running = a.run(
      async () => void terms.push('started'),
      () => void terms.push('stopped'),
    );
    while (terms.length === 0) await new Promise((resolve) => setTimeout(resolve, 0));
    hanging = true;
    await Promise.race([running, new Promise((resolve) => setTimeout(resolve, 2_000))]);
    expect(terms).toEqual(['started', 'stopped']);
    expect(a.isLeader).toBe(false);
    // The last renewTime written was at 0 or a retry period after it; a standby waits 15 s from it.
    expect(time).toBeLessThan(15_000);
    const b = elector(store, 'b', () => time);
    expect(await b.tryAcquireOrRenew(), 'the lease is still held for its duration').toBe(false);
  });

  it('ends the term at the renew deadline on its monotonic clock when its wall clock is stepped back an hour during a hung renew', async () => {
    const store = memoryStore();
    let hanging = false;
    const stalled: LeaseStore = {
      get: () => (hanging ? new Promise<never>(() => {}) : store.get()),
      create: (lease) => store.create(lease),
      replace: (lease) => store.replace(lease),
    };
    let time = 0;
    let wallStep = 0;
    const sleep = async (ms: number) => {
      time += ms;
      await new Promise((resolve) => setTimeout(resolve, 0));
    };
    const a = elector(
      stalled,
      'a',
      () => time + wallStep,
      sleep,
      () => time,
    );
    const terms: string[] = [];
    const running = a.run(
      async () => void terms.push('started'),
      () => void terms.push('stopped'),
    );
    while (terms.length === 0) await new Promise((resolve) => setTimeout(resolve, 0));
    hanging = true;
    wallStep = -3_600_000;
    await Promise.race([running, new Promise((resolve) => setTimeout(resolve, 2_000))]);
    expect(terms).toEqual(['started', 'stopped']);
    // Measured by the wall clock, the deadline would have been an hour away, and the lease long expired for others.
    expect(time).toBeLessThan(15_000);
  });

  it('hands over at once after the leader releases the lease', async () => {
    const store = memoryStore();
    const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));
    const a = new LeaderElector(store, options('a'), logger, () => new Date(0), tick);
    const b = new LeaderElector(store, options('b'), logger, () => new Date(10), tick);
    let started = false;
    const running = a.run(
      async () => {
        started = true;
      },
      () => {},
    );
    while (!started) await new Promise((resolve) => setTimeout(resolve, 0));
    await a.release();
    await running;
    expect(await b.tryAcquireOrRenew()).toBe(true);
  });

  it.each([
    { lease: 'no lease yet (its create on its way)', released: false },
    { lease: "a lease its predecessor released (the take's replace on its way)", released: true },
  ])('hands the lease back when the shutdown comes while a standby takes it: $lease', async ({ released }) => {
    const store = memoryStore();
    if (released) {
      await elector(store, 'gone', () => 0).tryAcquireOrRenew();
      store.lease!.spec!.holderIdentity = '';
    }
    // The API server answers the standby's write only when the test lets it go.
    let answer: (() => void) | undefined;
    const held =
      <T>(write: (lease: V1Lease) => Promise<T>) =>
      (lease: V1Lease) =>
        new Promise<void>((resolve) => (answer = resolve)).then(() => write(lease));
    let holding = true;
    const slow: LeaseStore = {
      get: () => store.get(),
      create: (lease) => (holding ? held((each) => store.create(each))(lease) : store.create(lease)),
      replace: (lease) => (holding ? held((each) => store.replace(each))(lease) : store.replace(lease)),
    };
    const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));
    const a = new LeaderElector(slow, options('a'), logger, () => new Date(0), tick);
    let started = false;
    const running = a.run(
      async () => void (started = true),
      () => {},
    );
    while (!answer) await new Promise((resolve) => setTimeout(resolve, 0));
    holding = false;
    // SIGTERM: the take is on its way, this replica does not lead yet.
    const releasing = a.release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    answer();
    await releasing;
    await running;
    expect(store.lease!.spec!.holderIdentity).toBe('');
    expect(started, 'a replica stopped before it led never starts leading').toBe(false);
    expect(a.isLeader).toBe(false);
    expect(await elector(store, 'b', () => 0).tryAcquireOrRenew()).toBe(true);
  });

  it('releases the lease when the shutdown comes while a renew is on its way', async () => {
    const store = memoryStore();
    // The API server answers writes in order; the renew's is held until the test lets it go.
    let renewHeld: (() => void) | undefined;
    let writes = Promise.resolve();
    let hold = false;
    const ordered: LeaseStore = {
      get: () => store.get(),
      create: (lease) => store.create(lease),
      replace: (lease) => {
        const gate = hold ? new Promise<void>((resolve) => (renewHeld = resolve)) : Promise.resolve();
        hold = false;
        const answer = writes.then(() => gate).then(() => store.replace(lease));
        writes = answer.then(
          () => undefined,
          () => undefined,
        );
        return answer;
      },
    };
    const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));
    const a = new LeaderElector(ordered, options('a'), logger, () => new Date(0), tick);
    let started = false;
    const running = a.run(
      async () => {
        started = true;
      },
      () => {},
    );
    while (!started) await new Promise((resolve) => setTimeout(resolve, 0));
    hold = true;
    while (!renewHeld) await new Promise((resolve) => setTimeout(resolve, 0));
    const releasing = a.release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    renewHeld();
    await releasing;
    await running;
    expect(store.lease!.spec!.holderIdentity).toBe('');
    const b = new LeaderElector(store, options('b'), logger, () => new Date(10), tick);
    expect(await b.tryAcquireOrRenew()).toBe(true);
  });
});
