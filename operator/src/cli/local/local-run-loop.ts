// The controller of a local run: reconcile the one run (the operator's own RunReconciler
// and decide()) whenever anything in the in-memory API server changes, or when the last
// decision asked to look again (the deadline, an approval's timeout), until the run is
// finished. A reconcile that throws is retried with a growing pause, as the controller's
// work queue does.
import { isTerminal, type CodingRun } from '../../api/index.ts';
import type { RunReconciler } from '../../controller/run-reconciler.ts';
import type { MemoryKubeGateway } from './memory-kube-gateway.ts';

/** Look again at least this often even when nothing asks for it. */
const RECHECK_MS = 30_000;
const MAX_BACKOFF_MS = 30_000;

export interface LocalRunLoopOptions {
  gateway: MemoryKubeGateway;
  reconciler: Pick<RunReconciler, 'reconcile'>;
  /** "namespace/name" */
  key: string;
  signal: AbortSignal;
  /** Told of the run after every reconcile (progress, approvals). */
  onRun(run: CodingRun): void;
  onError(error: unknown): void;
}

function pause(ms: number, wake: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    void wake.then(done);
  });
}

/** The run once it is terminal; undefined when the signal aborted first (or the run is gone). */
export async function reconcileUntilFinished(options: LocalRunLoopOptions): Promise<CodingRun | undefined> {
  const { gateway, reconciler, key, signal } = options;
  let failures = 0;
  while (!signal.aborted) {
    // Taken before the reconcile, so a change made while it runs is not missed.
    const changed = gateway.changed();
    let waitMs: number;
    try {
      const { requeueAfterMs } = await reconciler.reconcile(key);
      failures = 0;
      waitMs = Math.min(requeueAfterMs ?? RECHECK_MS, RECHECK_MS);
    } catch (error) {
      failures += 1;
      options.onError(error);
      waitMs = Math.min(MAX_BACKOFF_MS, 250 * 2 ** failures);
    }
    const run = gateway.current();
    if (!run) return undefined;
    options.onRun(run);
    if (isTerminal(run.status?.phase)) return run;
    // After a failure, a change must not cut the backoff short.
    await pause(waitMs, failures > 0 ? new Promise<void>(() => undefined) : changed, signal);
  }
  return undefined;
}
