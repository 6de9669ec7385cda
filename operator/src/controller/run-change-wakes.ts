// Which watch events wake a run (enqueue its reconcile). A reconcile that can decide nothing
// still costs the leader a decide, its cache reads and, now and then, a look at the agent; at
// one event a step, that was a reconcile a step on the process that also runs steps (#17.5).
import { isDeepStrictEqual } from 'node:util';
import { REASONS, isTerminal, type CodingRun } from '../api/index.ts';
import { isReleased } from '../reconcile/admission.ts';

/**
 * Whether a change to one of a run's ConfigMaps (as the run cache has it) needs the run
 * reconciled. Its diff snapshots and its transcript (one write a step) change nothing decide.ts
 * decides while the run lives; they count once it is being deleted, when each must be gone
 * before the finalizer goes. So only then, or when the run is not in the cache (a name cut in
 * its label, a cache behind), do they wake it.
 */
export const configMapChangeWakes = (run: CodingRun | undefined): boolean => !run || Boolean(run.metadata.deletionTimestamp);

/**
 * The status fields a step's progress write sets (run-status-writer.ts `progress`), and
 * nothing else does while a run is Running. decide.ts reads none of them: it only carries
 * them over into the status it writes (built from the cache, which still takes every event).
 */
const PROGRESS_FIELDS = ['steps', 'toolCalls', 'usage', 'timings'] as const;

/**
 * status.egress: the egress proxy's counts (egress/egress-status-writer.ts), added every
 * statusFlushSeconds by each replica for each run whose sandbox made connections. decide.ts reads
 * none of it, as for progress. It woke a reconcile about once a second for a run whose sandbox
 * kept asking for a host it was refused (a package manager retrying).
 */
const PROXY_FIELDS = ['egress'] as const;

/**
 * Pending reasons whose message the run's own reconcile writes afresh at each look, from a world
 * that moves without the run: a queued run's place (admission.ts), and the API server's answer to
 * its last pod create for a refused one (a quota's usage, a webhook's error). Both runs look
 * again at their own rechecks (QUEUED_RECHECK_MS, REFUSED_RECHECK_MS).
 */
const REWRITTEN_WHILE_PENDING: ReadonlySet<string | undefined> = new Set([REASONS.Queued, REASONS.SandboxRefused]);

/**
 * The run less what changes on every write (resourceVersion, managedFields), the progress
 * fields, the proxy's status.egress, status.admission and, while it is queued or refused, what
 * its own reconcile wrote of that (the message, the conditions' copies of it,
 * status.queue.position).
 * A queued run's place moves as others are admitted: when its own write of it woke it, it looked
 * again at once and wrote the place that had moved meanwhile, so every queued run was rewritten
 * as fast as the controller could go (about ten writes a queued run, at 300 and at 1000 runs).
 * It looks again at its rechecks and when it is next in its namespace (admission.ts queueHeads).
 * status.admission (sequence, time) is stamped anew each time the run is admitted, and a run
 * whose pod the API server refuses (a quota) is admitted again at every try: its write woke it,
 * the queue ran it again before its 10 s recheck (a woken key does not wait for its delay), and
 * it created its pod and wrote its status as fast as the API server answered. decide.ts never
 * reads a run's own admission; other runs' plans read it from the cache (lastAdmission), and the
 * queue is woken for them by queueChanged, not by this.
 */
function withoutRefreshes(run: CodingRun): unknown {
  const status: Record<string, unknown> = { ...run.status };
  for (const field of [...PROGRESS_FIELDS, ...PROXY_FIELDS]) delete status[field];
  delete status.admission;
  if (run.status?.phase === 'Pending' && REWRITTEN_WHILE_PENDING.has(run.status.reason)) {
    delete status.message;
    if (run.status.reason === REASONS.Queued) status.queue = { heldBy: run.status.queue?.heldBy };
    status.conditions = run.status.conditions?.map(({ message: _message, ...condition }) => condition);
  }
  const {
    resourceVersion: _version,
    managedFields: _fields,
    ...metadata
  } = run.metadata as CodingRun['metadata'] & {
    managedFields?: unknown;
  };
  return { ...run, metadata, status };
}

/**
 * Whether a change to a run needs it reconciled: every change but a step's progress, the egress
 * proxy's counts, its admission stamp, and a queued run's new place or a refused run's new
 * answer. None changes what decide.ts decides on; the run is still looked at on its own
 * rechecks (AGENT_RECHECK_MS, the deadline, QUEUED_RECHECK_MS, REFUSED_RECHECK_MS), and any
 * other change wakes it at once. A first sighting (no previous object) always wakes it.
 */
export function runChangeWakes(previous: CodingRun | undefined, run: CodingRun): boolean {
  return !previous || !isDeepStrictEqual(withoutRefreshes(previous), withoutRefreshes(run));
}

/**
 * Whether a change to a run can change who gets a sandbox slot next (maxActiveRuns): a run seen
 * for the first time (created, or listed as the operator starts), one that ended (its slot
 * frees once its pod goes, which the pod watch reports too), one that left the queue, or one
 * being deleted that lost the operator's finalizer while another keeps it (admission.ts
 * isReleased: its slot frees with its phase unchanged, so no phase says so).
 */
export function queueChanged(previous: CodingRun | undefined, run: CodingRun): boolean {
  if (!previous) return true;
  if (!isReleased(previous) && isReleased(run)) return true;
  const was = previous.status?.phase;
  const is = run.status?.phase;
  if (isTerminal(is)) return !isTerminal(was);
  return (was === undefined || was === 'Pending') && is !== undefined && is !== 'Pending';
}
