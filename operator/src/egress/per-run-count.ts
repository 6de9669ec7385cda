// How many of something each run holds open right now: the egress proxy's tunnels and
// forwarded requests, checked against OPEN_PER_RUN (decide-connection.ts) before one opens.
export class PerRunCount {
  private readonly counts = new Map<string, number>();

  of(runUid: string): number {
    return this.counts.get(runUid) ?? 0;
  }

  /** One more open; the returned function gives it back, once however often it is called. */
  open(runUid: string): () => void {
    this.counts.set(runUid, this.of(runUid) + 1);
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      const left = this.of(runUid) - 1;
      if (left > 0) this.counts.set(runUid, left);
      else this.counts.delete(runUid);
    };
  }
}
