// The tunnels and forwarded requests each run holds open through the egress proxy: counted
// against OPEN_PER_RUN (decide-connection.ts) before one opens, and closed together when the
// run is no longer served (it ended or was deleted), so none outlives its run's credential.
export class PerRunCount {
  private readonly open = new Map<string, Set<() => void>>();

  of(runUid: string): number {
    return this.open.get(runUid)?.size ?? 0;
  }

  /** One more open, closed by `close` if its run goes; the returned function gives it back, once. */
  add(runUid: string, close: () => void): () => void {
    let entries = this.open.get(runUid);
    if (!entries) this.open.set(runUid, (entries = new Set()));
    const entry = () => close();
    entries.add(entry);
    return () => {
      const current = this.open.get(runUid);
      if (!current?.delete(entry)) return;
      if (current.size === 0) this.open.delete(runUid);
    };
  }

  /** Closes everything of the runs `live` no longer knows. */
  closeGone(live: (runUid: string) => boolean): void {
    for (const [runUid, entries] of [...this.open]) {
      if (live(runUid)) continue;
      this.open.delete(runUid);
      for (const close of entries) close();
    }
  }
}
