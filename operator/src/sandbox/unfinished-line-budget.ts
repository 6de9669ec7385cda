// What a replica's readers of toolbox answers (kept sessions, one-shot processes) hold, all
// together, in lines begun and not yet ended. A reader keeps such a line until its newline, up
// to the 8 MiB an answer may be, in a buffer outside the heap limit. The toolbox writes each
// answer in one write, which comes whole in well under a second; code in the sandbox can
// instead begin a line while a call waits and stop short of its end, and sessions are kept per
// run: twenty held 160 MiB, a hundred would hold 800 MiB of a 1 GiB replica. Each reader gives
// up on such a line at its deadline (unfinished-line-watch.ts); this bounds how much they hold
// at once before that. Past the bound the readers whose lines began first are ended: an
// answer's line is young, a held one old.

/** A reader, as the budget sees it: ended when its line is the oldest of too many. */
export interface UnfinishedLineHolder {
  /** Ends the reader (its session or process); the holder's line no longer counts (the budget forgot it first). */
  evict(): void;
}

/**
 * Sixteen whole answers of 8 MiB. Answers arrive whole in well under a second, so the lines a
 * replica's sessions hold at once are about one per step job answered at that moment
 * (workerConcurrency, 8 by default: 64 MiB); twice that leaves room for honest lines while
 * held ones are being ended, and is far from the 1 GiB a replica has.
 */
export const UNFINISHED_LINES_MAX_BYTES = 128 * 1_048_576;

export class UnfinishedLineBudget {
  /** Each holder's bytes, in the order its line began (Map.set on a kept key keeps its place). */
  private readonly held = new Map<UnfinishedLineHolder, number>();
  private total = 0;

  constructor(readonly maxBytes: number) {}

  /** The bytes held by all holders together. */
  get heldBytes(): number {
    return this.total;
  }

  /**
   * The holder's unfinished line now holds `bytes` (0: it ended, or the holder is gone). Past
   * the bound, the holders of the oldest lines are ended, until the rest fit.
   */
  hold(holder: UnfinishedLineHolder, bytes: number): void {
    this.total -= this.held.get(holder) ?? 0;
    if (bytes === 0) {
      this.held.delete(holder);
      return;
    }
    this.held.set(holder, bytes);
    this.total += bytes;
    while (this.total > this.maxBytes) {
      const [oldest, oldestBytes] = this.held.entries().next().value as [UnfinishedLineHolder, number];
      this.held.delete(oldest);
      this.total -= oldestBytes;
      oldest.evict();
    }
  }
}

/** The budget every reader of this replica (this process) shares, unless it is given its own. */
export const REPLICA_UNFINISHED_LINES = new UnfinishedLineBudget(UNFINISHED_LINES_MAX_BYTES);
