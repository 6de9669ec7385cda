// At most `limit` tasks at once for each run; the rest wait their turn, in order. The proxy's
// name lookups go through one: getaddrinfo runs on libuv's small thread pool, shared by every
// run, and a lookup whose name server never answers holds a thread for the resolver's whole
// timeout. Unlimited, one run that asked for a few such names held every thread, and every
// other run's connections waited for them (20 s and more).
export class PerRunLimit {
  private readonly runs = new Map<string, { running: number; waiting: Array<() => void> }>();

  constructor(private readonly limit: number) {}

  async run<T>(runUid: string, task: () => Promise<T>): Promise<T> {
    let slot = this.runs.get(runUid);
    if (!slot) this.runs.set(runUid, (slot = { running: 0, waiting: [] }));
    if (slot.running < this.limit) slot.running++;
    else await new Promise<void>((resolve) => slot.waiting.push(resolve));
    try {
      return await task();
    } finally {
      // The slot passes to the next waiting task as it is, or is given up.
      const next = slot.waiting.shift();
      if (next) next();
      else if (--slot.running === 0) this.runs.delete(runUid);
    }
  }
}
