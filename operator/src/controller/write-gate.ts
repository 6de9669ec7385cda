// What keeps a reconciler that was stopped (the lease lost, or shutdown) from writing: another
// replica may lead already, and this one's caches no longer follow the cluster. The run
// reconciler's reconcile decided again on a frozen pod cache after a conflict and failed a
// healthy run SandboxLost; the schedule reconciler's list of runs came back after the lease was
// lost and it created its run beside the new leader's. Every write asks `check()` first.

/** Thrown by check() once the gate is closed; `unlessStopped` turns it into a quiet end. */
export class ReconcilerStoppedSignal extends Error {
  constructor() {
    super('the reconciler was stopped');
  }
}

export class WriteGate {
  private stopped = false;

  /** No write passes after this, the reconciles in flight included; what they had sent stays sent. */
  close(): void {
    this.stopped = true;
  }

  /** Before each write: throws ReconcilerStoppedSignal once closed. */
  check(): void {
    if (this.stopped) throw new ReconcilerStoppedSignal();
  }

  /** `reconcile`'s answer, or `stopped()`'s when it met the closed gate before a write. */
  async unlessStopped<T>(reconcile: () => Promise<T>, stopped: () => T): Promise<T> {
    try {
      return await reconcile();
    } catch (error) {
      if (error instanceof ReconcilerStoppedSignal) return stopped();
      throw error;
    }
  }
}
