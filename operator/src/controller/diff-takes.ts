// The diffs the controller takes from runs it ends (a cancel, a deadline, a lost agent), beside
// its reconciles rather than in them. A take waits on the sandbox for up to 30 s, and what is in
// the sandbox decides how long: a clean filter the model set in .gitattributes runs during the
// diff (`sleep 600`). Taken inside a reconcile, four such runs held every reconcile slot, and
// no other namespace's run was admitted, ended or approved meanwhile. Now a reconcile starts the
// take and ends; the run is woken when its diff is kept, and the next reconcile ends it with it.
import type { KeptDiff } from '../reconcile/kept-diff.ts';

/** Takes running at once per replica: a few, so one namespace's many slow takes wait behind each other, not before the controller. */
export const DIFF_TAKES_AT_ONCE = 2;

/**
 * How long a take's outcome waits for the poll that claims it, at most. An outcome is the
 * ending's that asked for it only while the run's decisions still ask for the diff: a reconcile
 * that no longer does (a cancel withdrawn, a run the worker ended first) drops it
 * (dropUnclaimed), so a later ending takes the diff afresh instead of the sandbox as it was
 * then. The take's end wakes the run, so that reconcile comes; this bound only keeps an outcome
 * no reconcile came for from staying in memory. It is far above the work queue's wait under
 * load (a burst of a thousand runs went through it in 33-87 s): an outcome dropped before its
 * poll would be taken again, and under such load again and again.
 */
export const DIFF_OUTCOME_KEPT_MS = 15 * 60_000;

type Outcome = { kept: KeptDiff } | { failed: unknown };

interface Take {
  uid: string;
  outcome?: Outcome;
  /** Drops the outcome once DIFF_OUTCOME_KEPT_MS have passed unclaimed. */
  expiry?: ReturnType<typeof setTimeout>;
}

export interface DiffTakesOptions {
  /** Takes running at once (DIFF_TAKES_AT_ONCE). */
  atOnce?: number;
  /** How long an outcome is kept for its poll (DIFF_OUTCOME_KEPT_MS). */
  keptForMs?: number;
}

export class DiffTakes {
  private readonly takes = new Map<string, Take>();
  private running = 0;
  /**
   * Takes waiting for a place, by namespace (each in the order polled), namespaces in the order
   * they began waiting. Places go to the namespaces in turn: one FIFO for all let a namespace's
   * twenty slow takes (a clean filter that holds `git diff` for 30 s each) hold another
   * namespace's cancel for five minutes.
   */
  private readonly waiting = new Map<string, Array<() => void>>();
  /** The namespace whose take started last: the next place goes to another one waiting. */
  private lastServed: string | undefined;
  private readonly atOnce: number;
  private readonly keptForMs: number;

  /** `done(key)`: the take of the run at key has ended (wake it). */
  constructor(
    private readonly done: (key: string) => void,
    options: DiffTakesOptions = {},
  ) {
    this.atOnce = options.atOnce ?? DIFF_TAKES_AT_ONCE;
    this.keptForMs = options.keptForMs ?? DIFF_OUTCOME_KEPT_MS;
  }

  /**
   * The outcome of the run's take, once it has ended (and forgotten then), or undefined while
   * it is under way; the first poll starts it. A take of an earlier run of the same name is
   * dropped, and so is an outcome no poll claimed within keptForMs: the next poll starts a new take.
   */
  poll(key: string, uid: string, take: () => Promise<KeptDiff>): Outcome | undefined {
    const known = this.takes.get(key);
    if (known && known.uid === uid) {
      if (known.outcome) this.drop(key, known);
      return known.outcome;
    }
    if (known) this.drop(key, known);
    const started: Take = { uid };
    this.takes.set(key, started);
    void this.run(namespaceOf(key), take).then((outcome) => {
      // Still the run's take (not forgotten, nor replaced by another run of the name's).
      if (this.takes.get(key) !== started) return;
      started.outcome = outcome;
      const expiry = setTimeout(() => {
        if (this.takes.get(key) === started) this.drop(key, started);
      }, this.keptForMs);
      expiry.unref?.();
      started.expiry = expiry;
      this.done(key);
    });
    return undefined;
  }

  /**
   * The run at key was decided on without asking for its diff: an outcome its take left is not
   * for a later ending (the run may have gone on since). A take still under way is left to end.
   */
  dropUnclaimed(key: string): void {
    const known = this.takes.get(key);
    if (known?.outcome) this.drop(key, known);
  }

  /** The run at key is gone: its take's outcome is not kept for anyone. */
  forget(key: string): void {
    const known = this.takes.get(key);
    if (known) this.drop(key, known);
  }

  /** Runs with a take under way or an outcome not claimed yet. */
  get size(): number {
    return this.takes.size;
  }

  private drop(key: string, take: Take): void {
    if (take.expiry !== undefined) clearTimeout(take.expiry);
    this.takes.delete(key);
  }

  private async run(namespace: string, take: () => Promise<KeptDiff>): Promise<Outcome> {
    // A take that ends hands its place to the next one waiting, so no more than atOnce ever run.
    if (this.running >= this.atOnce) await new Promise<void>((resolve) => this.wait(namespace, resolve));
    else {
      this.running++;
      this.lastServed = namespace;
    }
    try {
      return { kept: await take() };
    } catch (failed) {
      return { failed };
    } finally {
      const next = this.nextWaiting();
      if (next) next();
      else this.running--;
    }
  }

  private wait(namespace: string, resolve: () => void): void {
    const queue = this.waiting.get(namespace);
    if (queue) queue.push(resolve);
    else this.waiting.set(namespace, [resolve]);
  }

  /**
   * The first take of the namespace whose turn it is: the one that has waited longest, unless
   * its take started last and another namespace waits too. A namespace served goes to the back.
   */
  private nextWaiting(): (() => void) | undefined {
    const namespaces = [...this.waiting.keys()];
    const namespace = namespaces[0] === this.lastServed && namespaces.length > 1 ? namespaces[1] : namespaces[0];
    if (namespace === undefined) return undefined;
    const queue = this.waiting.get(namespace)!;
    const next = queue.shift();
    this.lastServed = namespace;
    this.waiting.delete(namespace);
    if (queue.length > 0) this.waiting.set(namespace, queue);
    return next;
  }
}

/** The namespace of a run key (namespace/name). */
function namespaceOf(key: string): string {
  return key.slice(0, key.indexOf('/'));
}
