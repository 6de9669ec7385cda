// The tunnels and forwarded requests the egress proxy holds open, by run, by the run's
// namespace and in all: counted against the OpenLimits (decide-connection.ts) before one
// opens, and closed together when their run is no longer served (it ended or was deleted), so
// none outlives its run's credential.
import type { EgressRun, OpenCounts } from './decide-connection.ts';

type Counted = Pick<EgressRun, 'uid' | 'namespace'>;

export class OpenCount {
  private readonly runs = new Map<string, { namespace: string; entries: Set<() => void> }>();
  private readonly namespaces = new Map<string, number>();
  private total = 0;

  of(run: Counted): OpenCounts {
    return { run: this.runs.get(run.uid)?.entries.size ?? 0, namespace: this.namespaces.get(run.namespace) ?? 0, total: this.total };
  }

  /** One more open, closed by `close` if its run goes; the returned function gives it back, once. */
  add(run: Counted, close: () => void): () => void {
    let slot = this.runs.get(run.uid);
    if (!slot) this.runs.set(run.uid, (slot = { namespace: run.namespace, entries: new Set() }));
    const entry = () => close();
    slot.entries.add(entry);
    this.count(run.namespace, 1);
    return () => {
      const current = this.runs.get(run.uid);
      if (!current?.entries.delete(entry)) return;
      if (current.entries.size === 0) this.runs.delete(run.uid);
      this.count(run.namespace, -1);
    };
  }

  /** Closes everything of the runs `live` no longer knows. */
  closeGone(live: (runUid: string) => boolean): void {
    for (const [runUid, slot] of [...this.runs]) {
      if (live(runUid)) continue;
      this.runs.delete(runUid);
      this.count(slot.namespace, -slot.entries.size);
      for (const close of slot.entries) close();
    }
  }

  private count(namespace: string, delta: number): void {
    const now = (this.namespaces.get(namespace) ?? 0) + delta;
    if (now === 0) this.namespaces.delete(namespace);
    else this.namespaces.set(namespace, now);
    this.total += delta;
  }
}

/** Two counts together: what is open plus what waits to open (a name being looked up). */
export function sumOpen(a: OpenCounts, b: OpenCounts): OpenCounts {
  return { run: a.run + b.run, namespace: a.namespace + b.namespace, total: a.total + b.total };
}
