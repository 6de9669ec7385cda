// Deterministic names for what the operator creates for a run. Deterministic, so a retried
// or restarted reconcile finds the object it created before instead of making a second one.
//
// Every name carries a hash of the run's uid: the API server picks the uid when the run is
// created, so no other run can derive the same name (a hash of the run NAME let a run named
// like another run's cut prefix get that run's pod, NetworkPolicy and diff ConfigMap), and
// no one can hold a run's names before the run exists. A name is still no proof of
// ownership: whoever holds it is checked against the run's uid (ownership.ts).
import { createHash } from 'node:crypto';

/** Pod names become hostnames: keep every name a DNS label. */
export const MAX_NAME = 63;
/** Hex digits of the uid hash: 64 bits, so even a chosen name finds no collision by trying. */
const HASH_LENGTH = 16;

/** What a derived name needs of a run: its name (for a readable prefix) and its uid. */
export interface RunIdentity {
  metadata: { name: string; uid: string };
}

function derivedName(run: RunIdentity, suffix: string): string {
  const { name, uid } = run.metadata;
  if (!uid) throw new Error(`derived names need the run's uid; codingrun "${name}" has none (was it read from the API server?)`);
  const hash = createHash('sha256').update(uid).digest('hex').slice(0, HASH_LENGTH);
  const keep = MAX_NAME - suffix.length - hash.length - 2;
  // A run name is a DNS subdomain and may hold dots; a label may not. The prefix only makes
  // the name readable; the hash makes it the run's.
  const prefix = name.replace(/\./g, '-').slice(0, keep).replace(/-+$/, '');
  return `${prefix}-${hash}-${suffix}`;
}

export const sandboxPodName = (run: RunIdentity) => derivedName(run, 'sandbox');
/**
 * The pod the run's sandbox is: the name in status once the operator wrote one (a claimed warm
 * pool pod has its pool's name, not the derived one), else the derived name of a pod it makes.
 */
export const runPodName = (run: RunIdentity & { status?: { podName?: string | undefined } | undefined }) =>
  run.status?.podName ?? sandboxPodName(run);
export const networkPolicyName = (run: RunIdentity) => derivedName(run, 'sandbox');
export const diffConfigMapName = (run: RunIdentity) => derivedName(run, 'diff');

/** A label value is at most 63 characters. */
const MAX_LABEL_VALUE = 63;

/**
 * The run's name as a label value (chamvi.dev/run): the name itself when it fits, else a cut
 * of it with a hash of the whole name. A run name may be 253 characters; a label value that
 * long made the API server refuse the run's pod, and the run never got a phase. The label
 * only helps people select a run's objects (`-l chamvi.dev/run=NAME`); the operator finds a
 * run from its objects by their controller ownerReference.
 */
export function runNameLabel(name: string): string {
  if (name.length <= MAX_LABEL_VALUE) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, HASH_LENGTH);
  const prefix = name.slice(0, MAX_LABEL_VALUE - HASH_LENGTH - 1).replace(/[-.]+$/, '');
  return `${prefix}-${hash}`;
}

/** The run's transcript chunk number `index` (record/transcript-chunks.ts). */
export const transcriptConfigMapName = (run: RunIdentity, index: number) => derivedName(run, `transcript-${index}`);

/**
 * The name of a CodingSchedule's run for one scheduled time: `<schedule>-<minutes since the
 * epoch>`, as CronJob names its Jobs. One name per time, so a create for that time sent again
 * (an answer lost, a restart before the status write) is refused AlreadyExists instead of
 * making a second run, and the schedule knows its run by name. Within MAX_NAME, as the
 * generated names before it were, so the name is its own chamvi.dev/run label (runNameLabel):
 * a schedule name too long for that is cut, and a hash of the whole name follows the cut, so
 * two schedules that share the cut do not share run names. A name is still no proof of
 * ownership: the schedule checks the run's controller (runs-of-schedule.ts).
 */
export function scheduledRunName(scheduleName: string, scheduledTime: Date): string {
  const minutes = String(Math.floor(scheduledTime.getTime() / 60_000));
  const whole = `${scheduleName}-${minutes}`;
  if (whole.length <= MAX_NAME) return whole;
  const hash = createHash('sha256').update(scheduleName).digest('hex').slice(0, HASH_LENGTH);
  // A cut ending in '.' or '-' would make `a.-…`, no DNS subdomain: the API server would refuse every run.
  const prefix = scheduleName.slice(0, MAX_NAME - minutes.length - hash.length - 2).replace(/[-.]+$/, '');
  return `${prefix}-${hash}-${minutes}`;
}
