// Keeps the `limit` smallest items of a stream of any length in bounded memory, so a listing
// of a huge tree, or the matches of a search, can be sorted and cut without holding them all.
// What is kept depends only on the items, never on the order they arrived in.
export class SortedSelection<T = string> {
  private items: T[] = [];
  private seen = 0;

  /** `compare` orders the items; items it calls equal are kept once. */
  constructor(
    private readonly limit: number,
    private readonly compare: (a: T, b: T) => number = compareCodeUnits as (a: T, b: T) => number,
  ) {}

  add(item: T): void {
    this.seen += 1;
    this.items.push(item);
    if (this.items.length >= this.limit * 2 + 1_024) this.compact();
  }

  /** The smallest `limit` items, sorted, and whether more were seen. */
  result(): { items: T[]; truncated: boolean } {
    this.compact();
    return { items: this.items, truncated: this.seen > this.items.length };
  }

  private compact(): void {
    this.items.sort(this.compare);
    const unique = this.items.filter((item, index) => index === 0 || this.compare(item, this.items[index - 1] as T) !== 0);
    this.seen -= this.items.length - unique.length;
    this.items = unique.slice(0, this.limit);
  }
}

export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
