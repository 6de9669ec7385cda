// At most `limit` tasks at once for each key (a run, a namespace); the rest wait their turn, in
// order, without holding up another key's. The proxy's name lookups go through two of them
// (lookup-limit.ts).
export class KeyedLimit {
  private readonly keys = new Map<string, { running: number; waiting: Array<() => void> }>();

  constructor(private readonly limit: number) {}

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let slot = this.keys.get(key);
    if (!slot) this.keys.set(key, (slot = { running: 0, waiting: [] }));
    if (slot.running < this.limit) slot.running++;
    else await new Promise<void>((resolve) => slot.waiting.push(resolve));
    try {
      return await task();
    } finally {
      // The slot passes to the next waiting task as it is, or is given up.
      const next = slot.waiting.shift();
      if (next) next();
      else if (--slot.running === 0) this.keys.delete(key);
    }
  }
}
