// Keeps the `limit` smallest strings of a stream of any length in bounded memory, so a listing
// of a huge tree can be sorted and cut without holding every path.
export class SortedSelection {
  private items: string[] = [];
  private seen = 0;

  constructor(private readonly limit: number) {}

  add(item: string): void {
    this.seen += 1;
    this.items.push(item);
    if (this.items.length >= this.limit * 2 + 1_024) this.compact();
  }

  /** The smallest `limit` items, sorted, and whether more were seen. */
  result(): { items: string[]; truncated: boolean } {
    this.compact();
    return { items: this.items, truncated: this.seen > this.items.length };
  }

  private compact(): void {
    this.items.sort(compareCodeUnits);
    const unique = this.items.filter((item, index) => index === 0 || item !== this.items[index - 1]);
    this.seen -= this.items.length - unique.length;
    this.items = unique.slice(0, this.limit);
  }
}

export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
