// What the reconciler observed about one run, gathered from the informer caches (and, only
// while a run is being validated, from GETs of the Secrets and ConfigMaps it references).
// decide() is a function of this, the operator config and the time: nothing else.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import type { CodingRun, HeldBy } from '../api/index.ts';
import type { NamespacePolicy } from './namespace-policy.ts';
import type { FinishedRunRecord } from './finished-runs.ts';
import type { IsolationView } from './isolation.ts';
import type { KeptDiff } from './kept-diff.ts';
import type { ContinueFromSource } from './continue-from-pin.ts';

export interface SandboxPodView {
  name: string;
  /** Pending | Running | Succeeded | Failed | Unknown */
  phase: string;
  ready: boolean;
  deleting: boolean;
  /** Why the pod is not (or no longer) running, from its status, for messages. */
  reason?: string;
  message?: string;
  /** When the pod was first seen bound to a node (status.timings PodScheduled); undefined while it is not. */
  scheduledAt?: string;
  /** The pod was claimed from a warm pool (its CLAIMED_FROM_LABEL), not created for the run. */
  claimed?: boolean;
  /**
   * The pod's status.startTime, when the kubelet took it on: what its activeDeadlineSeconds
   * counts from. Undefined until a kubelet has it.
   */
  startTime?: string;
  /** The pod's spec.activeDeadlineSeconds, fixed when it was made (or claimed): it can never be raised. */
  activeDeadlineSeconds?: number;
  /** The pod's uid: a delete names it (a precondition), so a pod made again under the name since is not deleted with it. */
  uid?: string;
}

/**
 * An answer in the chamvi.dev/approval annotation that a decision ignored (not JSON, or for an
 * approval never asked) while the run waited on approval `approvalId`: what its Warning Event was about.
 */
export interface IgnoredApproval {
  approvalId: string;
  /** The annotation's value, as it was. */
  annotation: string;
}

/**
 * An answer to the pending approval `approvalId` that a decision passed on, and when the
 * operator first saw it. Past the approval's timeout only an answer seen before it runs: one
 * first seen after is too late, and the timeout's deny acts instead (decide.ts).
 */
export interface SeenApproval {
  approvalId: string;
  /** The annotation's value, as it was, and who gave it: another value or approver is another answer, seen anew. */
  annotation: string;
  user?: string;
  /** ISO time of the first decision that saw it. */
  at: string;
  /**
   * Seen before the timeout, whatever `at` says: first seen by this process past it, with its
   * approve's resume job already queued (ObservedRun.answerQueued), which an earlier leader
   * does only for an answer it saw in time.
   */
  beforeTimeout?: true;
}

/** Keys present in each referenced object; undefined when the object does not exist. */
export interface ReferencedObjects {
  secrets: Record<string, string[] | undefined>;
  configMaps: Record<string, string[] | undefined>;
  /** Labels of each referenced Secret that exists (security #11.3: runs use only Secrets labelled usable-by-runs); absent is none. */
  secretLabels?: Record<string, Record<string, string>>;
}

/** Whether the run gets a sandbox slot now (admission.ts): its admission's sequence, or what holds it and where it stands. */
export type Admission = { admit: true; sequence: number } | { admit: false; heldBy: HeldBy; position?: number; message: string };

/**
 * What the agent holds of a running run, as facts for decide(): its working state, and
 * whether a job will move it on. A run whose state or jobs are gone (Redis restarted
 * without persistence) would otherwise stay Running until its deadline.
 */
export interface AgentView {
  /** The run's working state in Redis: missing, or the stage it is at. */
  state: 'missing' | 'preparing' | 'stepping' | 'waiting' | 'finalizing' | 'publishing' | 'done';
  /** A job of the run is queued, running or waiting to retry (or the state changed while looking). */
  moving: boolean;
  /** Why a job of the run failed for good, when one did and nothing moves the run any more. */
  failedJob?: string;
  /** Security #11.1: why the run's state in Redis cannot be trusted (its seal, its shape, another run's). */
  invalidState?: string;
}

/**
 * An object holding a name the operator derives for the run (its pod or NetworkPolicy) that
 * the run does not own (ownership.ts). Never used, never deleted: the run fails instead.
 */
export interface TakenName {
  kind: 'Pod' | 'NetworkPolicy';
  name: string;
  /** What makes it foreign, for the message. */
  why: string;
}

/**
 * The API server refused to create an object the run needs (its pod or NetworkPolicy): a
 * quota, an admission policy, RBAC, or an object that is invalid as derived from the run.
 */
export interface RefusedObject {
  /** CodingRun: the run's own finalizer was refused (an admission policy on its metadata). */
  kind: 'Pod' | 'NetworkPolicy' | 'CodingRun';
  name: string;
  /** The HTTP status: 403 (forbidden: may clear), 422 or 400 (invalid: cannot), 5xx (the API server's failure: may clear). */
  code: number;
  /** The API server's message, quoted to the user. */
  message: string;
}

/**
 * A working run's sandbox that the operator took down itself (unwritable-run.ts): the API server
 * refused every write of the run, so its pod was deleted and its agent stopped (its state with
 * it) without the status that ends a run. What the run's ending, once it can be written, says.
 */
export interface SandboxTakenDown {
  /** The pods deleted. */
  podsDeleted: string[];
  /** The run's size at the refused write, as the API server stores it, in KiB. */
  kibibytes: number;
}

export interface ObservedRun {
  run: CodingRun;
  /** The run's own sandbox pod: its derived name, the run's labels and controller ownerReference. */
  pod?: SandboxPodView;
  /**
   * The run's own NetworkPolicy exists (owned, as the pod). Earlier builds of the operator made
   * one per run; one such is now only deleted, once the pod is gone.
   */
  networkPolicyExists: boolean;
  /**
   * The namespace's sandbox NetworkPolicies as last seen (the cache, or what this process just
   * made); decide() compares them with what the run needs (reconcile/sandbox-network-policy.ts).
   */
  sandboxPolicies?: V1NetworkPolicy[];
  /** The run's derived names that a foreign object holds. */
  takenNames?: TakenName[];
  /** Names of ConfigMaps the operator created for this run (the full diff); looked up only while the run is being deleted. */
  ownedConfigMaps: string[];
  /** Present when the run still needs validating. */
  references?: ReferencedObjects;
  /**
   * The run's size as JSON, its template's copy included (status.template): measured while the
   * run still needs validating, for decide() refuses one too large to write (MAX_RUN_BYTES).
   */
  objectBytes?: number;
  /** The run's namespace's policy (its annotations), for validating; absent is none. */
  namespacePolicy?: NamespacePolicy;
  /** For a run waiting for a slot (no phase yet, or Pending) whose isolation gate is open (isolation.ts): one it holds is admitted nothing. */
  admission?: Admission;
  /**
   * For a run not yet accepted whose spec names continueFrom: that run as found in the namespace,
   * which accepting the run pins by uid, once it has finished (continue-from-pin.ts). Also for an
   * unfinished run accepted without status.continuedFrom, which decide() pins then.
   */
  continueFromSource?: ContinueFromSource;
  /** For a run not yet accepted: what chamvi-finished-runs records of a run of its name deleted by its TTL (#15.2). */
  finishedBefore?: FinishedRunRecord;
  /** For a Running or WaitingForApproval run: what the agent holds of it; undefined when unknown. */
  agent?: AgentView;
  /** What the API server refused to create for the run in this reconcile (the reconciler decides again knowing it). */
  refused?: RefusedObject[];
  /** The diff kept for a run that decide() is ending, once the keepDiff action has taken it. */
  keptDiff?: KeptDiff;
  /** What a claimWarmPod action got: a pool pod now the run's, or none (the run gets a fresh pod). */
  warmClaim?: { podName: string } | { none: true };
  /**
   * This process sent the create of the run's own (fresh) pod, which the pod cache does not
   * show yet: the run goes on with it and claims no pool pod (that was a second sandbox).
   */
  freshPodSent?: boolean;
  /** For a run not yet given a sandbox: whether NetworkPolicy is enforced in its namespace (security #11.8); undefined is unknown. */
  isolation?: IsolationView;
  /**
   * The answer the last decision about this run ignored, and recorded an ApprovalIgnored
   * Warning for (Decision.ignoredApproval): the same answer, still in the annotation at the
   * next look, is not warned of again. Kept by the reconciler in memory only.
   */
  ignoredApproval?: IgnoredApproval;
  /**
   * The answer to the pending approval the last decision passed on, and when it was first seen
   * (Decision.seenApproval). Kept by the reconciler in memory only: a new leader sees it anew,
   * and past the timeout denies the call, as for an answer that came late.
   */
  seenApproval?: SeenApproval;
  /**
   * Whether the approve's resume job is in the agent's queue (RunAgent.answerQueued): asked
   * only when a decision finds an approve past the timeout with no seenApproval for it
   * (Decision.lookUpQueuedAnswer), as after a leader change, and decided again knowing.
   */
  answerQueued?: boolean;
  /**
   * This process took the run's sandbox down because every write of the run was refused, and
   * the run is looked at again since it may fit (its labels or annotations trimmed). Kept by the
   * reconciler in memory only: after a restart or a leader change the run's ending says only that
   * its pod disappeared.
   */
  sandboxTakenDown?: SandboxTakenDown;
}
