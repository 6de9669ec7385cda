// maxActiveRuns: how many runs hold a sandbox slot and how many wait ahead of a given run.
// Pure. The controller passes the runs it admitted itself but whose new phase its cache has
// not seen yet, so a burst of new runs cannot be admitted past the limit.
import { isTerminal, type CodingRun, type Phase } from '../api/index.ts';
import type { Admission } from './observed-run.ts';

const ACTIVE: ReadonlySet<Phase | undefined> = new Set(['Provisioning', 'Running', 'WaitingForApproval']);

/** Creation order; runs created in the same second are ordered by name. */
export function createdBefore(a: CodingRun, b: CodingRun): boolean {
  const at = a.metadata.creationTimestamp ?? '';
  const bt = b.metadata.creationTimestamp ?? '';
  if (at !== bt) return at < bt;
  if (a.metadata.namespace !== b.metadata.namespace) return a.metadata.namespace < b.metadata.namespace;
  return a.metadata.name < b.metadata.name;
}

export function isActive(run: CodingRun, admittedLocally: ReadonlySet<string>): boolean {
  const phase = run.status?.phase;
  if (isTerminal(phase)) return false;
  return ACTIVE.has(phase) || admittedLocally.has(run.metadata.uid);
}

function isWaiting(run: CodingRun, admittedLocally: ReadonlySet<string>): boolean {
  if (run.metadata.deletionTimestamp) return false;
  const phase = run.status?.phase;
  return (phase === undefined || phase === 'Pending') && !admittedLocally.has(run.metadata.uid);
}

/**
 * `holdsSandbox` tells whether a finished run's sandbox pod is still up: the run's phase is
 * written before its pod is deleted, and maxActiveRuns promises sandboxes, not phases, so
 * the slot is free only once the pod is going.
 */
export function computeAdmission(
  runs: readonly CodingRun[],
  self: CodingRun,
  admittedLocally: ReadonlySet<string>,
  holdsSandbox: (run: CodingRun) => boolean = () => false,
): Admission {
  let active = 0;
  let queuedAhead = 0;
  for (const other of runs) {
    if (other.metadata.uid === self.metadata.uid) continue;
    if (isActive(other, admittedLocally) || (isTerminal(other.status?.phase) && holdsSandbox(other))) active++;
    else if (isWaiting(other, admittedLocally) && createdBefore(other, self)) queuedAhead++;
  }
  return { active, queuedAhead };
}
