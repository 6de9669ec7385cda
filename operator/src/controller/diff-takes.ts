// The diffs the controller takes from runs it ends (a cancel, a deadline, a lost agent), beside
// its reconciles rather than in them. A take waits on the sandbox for up to 30 s, and what is in
// the sandbox decides how long: a clean filter the model set in .gitattributes runs during the
// diff (`sleep 600`). Taken inside a reconcile, four such runs held every reconcile slot, and
// no other namespace's run was admitted, ended or approved meanwhile. Now a reconcile starts the
// take and ends; the run is woken when its diff is kept, and the next reconcile ends it with it.
import type { KeptDiff } from '../reconcile/kept-diff.ts';

/** Takes running at once per replica: a few, so a namespace's many slow takes queue behind each other, not before the controller. */
export const DIFF_TAKES_AT_ONCE = 2;

type Outcome = { kept: KeptDiff } | { failed: unknown };

interface Take {
  uid: string;
  outcome?: Outcome;
}

export class DiffTakes {
  private readonly takes = new Map<string, Take>();
  private running = 0;
  private readonly queued: Array<() => void> = [];

  /** `done(key)`: the take of the run at key has ended (wake it). */
  constructor(
    private readonly done: (key: string) => void,
    private readonly atOnce = DIFF_TAKES_AT_ONCE,
  ) {}

  /**
   * The outcome of the run's take, once it has ended (and forgotten then), or undefined while
   * it is under way; the first poll starts it. A take of an earlier run of the same name is
   * dropped.
   */
  poll(key: string, uid: string, take: () => Promise<KeptDiff>): Outcome | undefined {
    const known = this.takes.get(key);
    if (known && known.uid === uid) {
      if (known.outcome) this.takes.delete(key);
      return known.outcome;
    }
    const started: Take = { uid };
    this.takes.set(key, started);
    void this.run(take).then((outcome) => {
      // Still the run's take (not forgotten, nor replaced by another run of the name's).
      if (this.takes.get(key) !== started) return;
      started.outcome = outcome;
      this.done(key);
    });
    return undefined;
  }

  /** The run at key is gone: its take's outcome is not kept for anyone. */
  forget(key: string): void {
    this.takes.delete(key);
  }

  get size(): number {
    return this.takes.size;
  }

  private async run(take: () => Promise<KeptDiff>): Promise<Outcome> {
    // A take that ends hands its place to the next one queued, so no more than atOnce ever run.
    if (this.running >= this.atOnce) await new Promise<void>((resolve) => this.queued.push(resolve));
    else this.running++;
    try {
      return { kept: await take() };
    } catch (failed) {
      return { failed };
    } finally {
      const next = this.queued.shift();
      if (next) next();
      else this.running--;
    }
  }
}
