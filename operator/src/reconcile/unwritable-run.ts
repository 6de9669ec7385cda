// A run the API server will not store any write of (etcd's "request is too large"): what the
// controller does with its sandbox, when it looks at the run again, and what it tells the run's
// author. Pure. A run can be grown past what a status write needs after it was accepted (its
// labels and annotations are no part of its generation, and only a run being accepted is
// measured, decide.ts MAX_RUN_BYTES): its admitting write failed after its pod was created, and
// the slot given back left that pod up, counted by nothing, for up to its activeDeadlineSeconds.
import type { Action } from './decision.ts';
import type { SandboxPodView, SandboxTakenDown } from './observed-run.ts';

/** What the controller holds of a run it found unwritable, to tell when it is worth another write. */
export interface UnwritableMark {
  /** metadata.generation when the write was refused: a new spec may be smaller. */
  generation: number | undefined;
  /** The run's size then (run-bytes.ts runBytes), as the cache had it: trimmed labels or annotations make it smaller. */
  bytes: number;
}

/**
 * Whether a run marked unwritable is still not worth a write: nothing that could make it fit has
 * changed. Its deletion is always looked at (its finalizer path writes no status).
 */
export function stillUnwritable(mark: UnwritableMark, run: { generation: number | undefined; bytes: number; deleting: boolean }): boolean {
  return !run.deleting && run.generation === mark.generation && run.bytes >= mark.bytes;
}

/** What the controller knows of an unwritable run's sandbox at the refused write. */
export interface UnwritableSandbox {
  /** The run's pod as observed (the cache, or a claim not cached yet). */
  observedPod?: SandboxPodView;
  /** The pod the API server answered this reconcile's create or claim with. */
  answeredPod?: { name: string; uid?: string };
  /** The name of a fresh pod whose create this process sent and has not seen answered or cached (it may exist). */
  createSent?: string;
  /** The name of the run's own NetworkPolicy, when it exists (an earlier build made one per run). */
  networkPolicy?: string;
  /** The run's agent may have been started: its phase is past Pending, or this reconcile started it. */
  agentStarted?: boolean;
}

/**
 * The actions that take an unwritable run's sandbox down, as a refused run's are (decide.ts
 * stopSandbox): its agent stopped, every pod it may have deleted (by uid where known, so a pod
 * made again under the name is not), and its own NetworkPolicy once no pod is left, since the
 * policy fences in a pod for its grace period. Applied without the status write that comes
 * first when a run ends: that is the write refused. A run with no sandbox and no agent (refused
 * while being accepted) has nothing to take down.
 */
export function unwritableRunTeardown(sandbox: UnwritableSandbox): Action[] {
  const { observedPod, answeredPod, createSent, networkPolicy } = sandbox;
  const pods = new Map<string, string | undefined>();
  if (observedPod && !observedPod.deleting) pods.set(observedPod.name, observedPod.uid);
  if (answeredPod && !pods.has(answeredPod.name)) pods.set(answeredPod.name, answeredPod.uid);
  if (createSent && !pods.has(createSent) && observedPod?.name !== createSent) pods.set(createSent, undefined);
  const actions: Action[] = [];
  if (sandbox.agentStarted || observedPod || pods.size > 0 || networkPolicy) actions.push({ type: 'stopAgent' });
  for (const [name, uid] of pods) actions.push({ type: 'deletePod', name, ...(uid ? { uid } : {}) });
  if (!observedPod && pods.size === 0 && networkPolicy) actions.push({ type: 'deleteNetworkPolicy', name: networkPolicy });
  return actions;
}

/** The Warning Event's text: why the run has no phase and no sandbox, and what makes it fit again. */
export function unwritableMessage(kibibytes: number, podsDeleted: readonly string[], working = false): string {
  const sandbox =
    podsDeleted.length > 0
      ? ` Its sandbox pod${podsDeleted.length > 1 ? 's' : ''} ${podsDeleted.join(', ')} ${podsDeleted.length > 1 ? 'were' : 'was'} deleted and its agent stopped, and it holds no slot of maxActiveRuns.`
      : ' It holds no slot of maxActiveRuns and gets no sandbox.';
  // A working run's agent state goes with its stop (the one sign every job of it heeds), so it
  // cannot go on: looked at again, it ends, keeping the diff of its last snapshot only. One still
  // Pending or Provisioning is admitted again and starts over (endsOnceWritten).
  const after = working
    ? ' Its work cannot go on: trimmed (its metadata.labels and metadata.annotations), it is looked at again and ends, keeping the diff of its last snapshot, without the commit spec.continueFrom needs.'
    : ' Or trim its metadata.labels and metadata.annotations: it is looked at again once it is smaller.';
  return (
    `The API server refuses every write to this run: it is ${kibibytes} KiB as the API server stores it, too large to store with a status.` +
    sandbox +
    ' Delete it and create it smaller (spec.sandbox.env, spec.task and spec.instructions are most of a spec).' +
    after
  );
}

/**
 * Whether a run torn down in this phase can only end once it is written: a Running or
 * WaitingForApproval run is never given another pod, and its agent's state went with the stop.
 * One stored as Pending or Provisioning is admitted again and starts over with a new pod.
 */
export function endsOnceWritten(storedPhase: string | undefined): boolean {
  return storedPhase === 'Running' || storedPhase === 'WaitingForApproval';
}

/**
 * What a teardown leaves for the run's ending to say (ObservedRun.sandboxTakenDown): only for a
 * run stored as Running or WaitingForApproval, which cannot be given another pod and can only
 * end once it is written, and only when the teardown deleted a pod (one already gone or being
 * deleted was lost before the operator acted, and its ending says so). A run stored as Pending or
 * Provisioning is admitted again and given a new pod once it fits.
 */
export function sandboxTakenDown(
  storedPhase: string | undefined,
  teardown: readonly Action[],
  kibibytes: number,
): SandboxTakenDown | undefined {
  if (!endsOnceWritten(storedPhase)) return undefined;
  const podsDeleted = teardown.flatMap((action) => (action.type === 'deletePod' ? [action.name] : []));
  return podsDeleted.length > 0 ? { podsDeleted, kibibytes } : undefined;
}

/** The status.message of a working run whose sandbox the operator took down (decide.ts): what happened, and why it ends. */
export function takenDownEndingMessage(takenDown: SandboxTakenDown): string {
  const pods = takenDown.podsDeleted;
  return (
    `The operator deleted sandbox pod${pods.length > 1 ? 's' : ''} ${pods.join(', ')} and stopped the run's agent: ` +
    `the API server refused every write of this run, which was ${takenDown.kibibytes} KiB as the API server stores it, ` +
    'too large to store with a status (its metadata.labels and metadata.annotations count too). ' +
    "The agent's working state went with the stop, so the run cannot go on: it ends keeping the diff of its last snapshot, " +
    'without the commit spec.continueFrom needs. Create the run again, smaller.'
  );
}
