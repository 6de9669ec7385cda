// The client connections the egress proxy holds, by source address and in all: counted when a
// connection is accepted, given back when it closes. Before a request is read nothing says
// whose a connection is, so the source address (a sandbox pod's) is the only owner there is.
import { canonicalAddress } from './decide-connection.ts';

export class SourceConnections {
  private readonly sources = new Map<string, number>();
  private total = 0;

  of(source: string): { source: number; total: number } {
    return { source: this.sources.get(canonicalAddress(source)) ?? 0, total: this.total };
  }

  /** One more from `source`; the returned function gives it back, once. */
  add(source: string): () => void {
    const key = canonicalAddress(source);
    this.sources.set(key, (this.sources.get(key) ?? 0) + 1);
    this.total++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const now = this.sources.get(key)! - 1;
      if (now === 0) this.sources.delete(key);
      else this.sources.set(key, now);
      this.total--;
    };
  }
}
