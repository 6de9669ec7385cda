// Which run, if any, a change the run watch reports takes away for good: the one deleted, or
// the one a relist found replaced under its name by another uid (deleted and created again
// while the watch was down: no deletion is reported for it). Its uid is known only from this
// last sight, and the reconciler needs it to stop that run's agent (run-reconciler.ts
// runDeleted). Pure.
import type { CodingRun } from '../api/index.ts';

export function runGoneWith(previous: CodingRun | undefined, run: CodingRun, deleted: boolean): CodingRun | undefined {
  if (deleted) return run;
  if (previous && previous.metadata.uid !== run.metadata.uid) return previous;
  return undefined;
}
