// The thin shell around decide(): read one run's world from the informer caches, ask
// decide() what to do, do it, and write the status in ONE place. Level-triggered: the key
// is only a name; whatever happened, the current state is read again.
import { FINISHED_RUNS_CONFIG_MAP, ForeignFinishedRunsError, findFinishedRun, type FinishedRunRecord } from '../reconcile/finished-runs.ts';
import { runBytes } from '../reconcile/run-bytes.ts';
import { storedJsonBytes } from '../text/stored-json-bytes.ts';
import {
  endsOnceWritten,
  sandboxTakenDown,
  stillUnwritable,
  unwritableMessage,
  unwritableRunTeardown,
  type UnwritableMark,
} from '../reconcile/unwritable-run.ts';
import type { KubernetesObject, V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import { EVENT_REASONS, FINALIZER, REASONS, isTerminal, type CodingRun, type ParsedCodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import {
  inPlanScope,
  isActive,
  laterAdmission,
  queueHeads,
  recordedAdmission,
  type Grant,
  type LastAdmission,
  type PlanScope,
  type TokenBudgetView,
} from '../reconcile/admission.ts';
import { utcDay, type NamespacePolicy } from '../reconcile/namespace-policy.ts';
import { findCondition } from '../reconcile/conditions.ts';
import { decide } from '../reconcile/decide.ts';
import { isolationGate, needsIsolationProbe, type IsolationView } from '../reconcile/isolation.ts';
import type { Action, Decision } from '../reconcile/decision.ts';
import { networkPolicyName, runPodName, sandboxPodName } from '../reconcile/names.ts';
import type {
  IgnoredApproval,
  ObservedRun,
  ReferencedObjects,
  RefusedObject,
  SandboxPodView,
  SandboxTakenDown,
  SeenApproval,
  TakenName,
} from '../reconcile/observed-run.ts';
import type { KeptDiff } from '../reconcile/kept-diff.ts';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { parseSpec, referencesOf } from '../reconcile/validate-run.ts';
import { observeContinueFromSource } from '../reconcile/continue-from-pin.ts';
import { templateToRead, withTemplate } from '../reconcile/run-template.ts';
import type { CodingRunTemplate } from '../api/coding-run-template.ts';
import { apiRefusal, apiServerFailure, isConflict, isTooLargeToStore, statusCodeOf } from '../kube/api-errors.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import { goneUnlessSame, type KubeGateway } from '../kube/kube-gateway.ts';
import type { ObjectMetadata } from '../kube/metadata-only.ts';
import type { RunAgent } from '../reconcile/run-agent.ts';
import { runLogFields } from '../observability/run-log-fields.ts';
import type { OperatorMetrics } from '../observability/operator-metrics.ts';
import { addedTimings } from '../reconcile/run-timings.ts';
import { withAdmittedPod, withRanImages, type PodSeen } from '../reconcile/admitted-pod-record.ts';
import type { WarmSessions } from '../sandbox/warm-sessions.ts';
import { CLAIMED_FROM_LABEL, claimOf, claimPatch, type WarmPoolConfig } from '../reconcile/warm-pool.ts';
import { claimOrder } from '../reconcile/warm-pool-plan.ts';
import { WarmPoolClaimSeal } from '../reconcile/warm-pool-claim-seal.ts';
import type { WarmPoolGateway } from '../kube/warm-pool-gateway.ts';
import { isPoolPod, poolPodView } from './warm-pool-loop.ts';
import { fenceUnansweredClaim } from './warm-pool-claim-fence.ts';
import { AdmissionPlanCache, CountedMap, CountedSet, type FairShareView } from './admission-plan-cache.ts';
import { DeletionsSent } from './deletions-sent.ts';
import { DiffTakes } from './diff-takes.ts';
import { WriteGate } from './write-gate.ts';
import { SandboxPoliciesMade } from './sandbox-policies-made.ts';
import {
  SANDBOX_DENY_ALL_POLICY,
  SANDBOX_EGRESS_POLICY,
  isSandboxPolicyAsWanted,
  isSandboxPolicyLabelled,
  sandboxDenyAllPolicy,
  sandboxEgressPolicy,
} from '../reconcile/sandbox-network-policy.ts';

/** The record of a TTL-deleted run of this name, from the cached chamvi-finished-runs (#15.2). */
function finishedBefore(configMap: V1ConfigMap | undefined, name: string): { finishedBefore?: FinishedRunRecord } {
  const found = findFinishedRun(configMap?.data, name);
  return found ? { finishedBefore: found } : {};
}

/** Whether the run's effective spec opens any egress (a template may give it). */
function hasEgress(run: CodingRun): boolean {
  const parsed = parseSpec(run);
  return parsed.ok && parsed.spec.sandbox.egress.allow.length > 0;
}

export interface ObjectCache<T> {
  get(namespace: string, name: string): T | undefined;
  list(): T[];
}

export interface ReconcilerCaches {
  runs: ObjectCache<CodingRun>;
  pods: ObjectCache<V1Pod>;
  networkPolicies: ObjectCache<V1NetworkPolicy>;
  /** The operator's own ConfigMaps (diffs, transcript chunks), as metadata only (kube/metadata-only.ts). */
  configMaps: ObjectCache<ObjectMetadata>;
  /** Each namespace's chamvi-finished-runs, whole. */
  finishedRuns: ObjectCache<V1ConfigMap>;
}

export interface ReconcilerLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface RunReconcilerDeps {
  caches: ReconcilerCaches;
  kube: KubeGateway;
  agent: RunAgent;
  events: EventRecorder;
  config: OperatorConfig;
  logger: ReconcilerLogger;
  /**
   * The egress proxy's address as it is now (egress/egress-proxy-address.ts), read before a
   * sandbox with egress is created; absent when config.egressProxy.address is fixed.
   */
  egressProxyAddress?: { get(): Promise<string> };
  /** Issue #15.4: the teams' settings and their token tallies; absent, no namespace has limits of its own. */
  fairShare?: FairShareSources;
  /**
   * The admission plan kept between reconciles (admission-plan-cache.ts), told of every run and
   * sandbox pod change by the watches. Absent, every reconcile of a waiting run makes its own.
   */
  admissionPlans?: AdmissionPlanCache;
  /** Reconcile this run soon (the work queue): a run granted a slot by another run's reconcile. */
  wake?: (key: string) => void;
  /**
   * Whether a watched namespace has listed (run-controller.ts: watched-namespaces.ts); one set
   * aside is left out of admission (admission.ts inPlanScope). Absent: every namespace has.
   */
  listed?: (namespace: string) => boolean;
  /** Security #11.8: whether NetworkPolicy is enforced in a namespace (controller/isolation-probe.ts); absent means unknown. */
  isolation?: { observe(namespace: string): IsolationView };
  /** Warm pools (docs/warm-pools.md): claims pool pods; absent, no run is given one. */
  warmPools?: {
    gateway: WarmPoolGateway;
    onClaim?: (pool: WarmPoolConfig, podName: string) => void;
    /**
     * Whether the pool loop made the pod for this pool (warm-pool-loop.ts madeIt): only those are
     * claimed, or taken as a run's claimed pod, never a pod that merely has the labels.
     */
    madeIt: (pod: V1Pod, pool: WarmPoolConfig) => boolean;
    /** Tool sessions opened ahead into ready pool pods (sandbox/warm-sessions.ts), kept by the pool loop. */
    sessions?: WarmSessions;
  };
  /**
   * #15.3: reads the CodingRunTemplate a run names (spec.templateRef), only while the run is being
   * accepted; undefined when it does not exist. Absent, no template is found (the local CLI).
   */
  templates?: { get(namespace: string, name: string): Promise<CodingRunTemplate | undefined> };
  /** chamvi_run_phase_duration_seconds: fed with the status.timings entries each status write adds. */
  metrics?: Pick<OperatorMetrics, 'observePhases'>;
  now?: () => Date;
}

/** Where admission reads what the cluster admin set per namespace, and what each namespace spent today. */
export interface FairShareSources {
  /** The namespace's policy, from its annotations (kube/namespace-policy-reader.ts). */
  policyOf(namespace: string): Promise<NamespacePolicy>;
  /** Tokens the namespace's runs spent on the UTC day (workers/namespace-token-tally.ts). */
  tokensOn(namespace: string, day: string): Promise<number>;
}

/** Without fair-share sources no namespace has a policy or a budget. */
const NO_FAIR_SHARE: FairShareView = { policies: new Map(), budgets: new Map(), unreadable: new Set() };

/** Whether an action may have started the run's agent (taken down with its sandbox when the status cannot be written). */
const startsAgent = (action: Action) => action.type === 'startAgent' || action.type === 'resumeAgent';

/** What stops a run's work; applied only after the status that ends the run is written. */
const STOPPING = new Set<Action['type']>(['stopAgent', 'deletePod', 'deleteNetworkPolicy']);

/** How often a status write may meet a conflict before the key goes back to the queue. */
const MAX_CONFLICT_RETRIES = 5;
/** A deleted run whose job still runs is looked at again this soon (nothing else wakes it). */
const JOBS_RUNNING_RECHECK_MS = 1_000;
/** How often a run too large for any write is looked at again (it can only be deleted). */
const TOO_LARGE_RECHECK_MS = 10 * 60_000;
/** How often a run whose finished record was refused is tried again (keepFinishedRecord). */
const FINISHED_RECORD_RECHECK_MS = 10 * 60_000;
/** A run whose diff is being taken is looked at again this soon, if nothing wakes it first (a take is at most 30 s). */
const DIFF_TAKING_RECHECK_MS = 5_000;

const ownedBy = (run: CodingRun) => (object: KubernetesObject | undefined) => object !== undefined && isOwnedByRun(object, run);

/** A pod or policy at one of the run's derived names that is not the run's (the informers see only labelled ones). */
function takenName(run: CodingRun, kind: TakenName['kind'], object: KubernetesObject | undefined): TakenName[] {
  if (!object || isOwnedByRun(object, run)) return [];
  return [{ kind, name: object.metadata!.name!, why: whyNotOwned(object, run) }];
}

/**
 * Thrown by applyAction when creating the run's pod or policy met an object of that name
 * that the run does not own (one without the operator's labels, which no informer sees).
 */
class NameTakenError extends Error {
  constructor(readonly taken: TakenName) {
    super(`${taken.kind} ${taken.name} is not the run's: ${taken.why}`);
  }
}

/** Thrown by applyAction when the API server refused the run's pod or policy, or its finalizer (a quota, a policy, an invalid object). */
class CreateRefusedError extends Error {
  constructor(readonly refused: RefusedObject) {
    super(`${refused.kind} ${refused.name} refused: ${refused.message}`);
  }
}

/** Thrown by applyAction once a warm pod was claimed for the run, or none could be: decide() goes on knowing it. */
class WarmClaimSignal extends Error {
  constructor(
    readonly claim: WarmClaim,
    readonly run: CodingRun,
  ) {
    super('warm pod claim');
  }
}

/** A pool pod claimed for the run, as the claim's answer has it; or none could be. */
type WarmClaim = { podName: string; pod: V1Pod } | { none: true };

/** How many pool pods one claim tries before the run takes a fresh pod (each loss is another claimer's win). */
const CLAIM_TRIES = 3;

/**
 * A 500 from an admission webhook the API server could not call ("failed calling webhook"): the
 * update was refused before it reached etcd, so nothing was claimed. Any other 5xx (a 504, an
 * etcd timeout) says nothing of the write, which may still commit after the pod was read back:
 * taken as refused, the run got a fresh pod and the late claim a second sandbox; thrown, the
 * reconcile is retried and finds the claimed pod by its seal if the claim landed (claimedPod).
 */
function webhookFailure(error: unknown): { code: number; message: string } | undefined {
  const failure = apiServerFailure(error);
  return failure?.code === 500 && /failed calling webhook/i.test(failure.message) ? failure : undefined;
}

/**
 * A claim that claimed nothing: the API server answered it with a refusal (apiRefusal) or an
 * admission webhook's failure (webhookFailure), or its answer was lost to another 5xx and the
 * claim was fenced off (`fenced`: warm-pool-claim-fence.ts; the pool pod deleted).
 */
class ClaimRefused {
  readonly code: number;
  readonly message: string;
  readonly fenced: boolean;
  constructor(refusal: { code: number; message: string }, fenced = false) {
    this.code = refusal.code;
    this.message = refusal.message;
    this.fenced = fenced;
  }
}

/** Thrown by applyAction while the run's diff is being taken: the reconcile ends, and the take's end wakes the run. */
class DiffTakingSignal extends Error {
  constructor() {
    super('diff being taken');
  }
}

/** Thrown by applyAction once the run's diff is kept: decide() ends the run knowing it. */
class DiffKeptSignal extends Error {
  constructor(readonly kept: KeptDiff) {
    super('diff kept');
  }
}

/** Creates one of the run's objects (or adds its finalizer); a refusal or failure by the API server becomes a CreateRefusedError, for decide() to judge. */
async function createOrRefuse<T>(kind: RefusedObject['kind'], name: string, create: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (error) {
    // A failure on the API server's side is said too: the run shows Pending and why, rather
    // than no phase at all, for as long as a webhook it calls is down.
    const refusal = apiRefusal(error) ?? apiServerFailure(error);
    if (refusal) throw new CreateRefusedError({ kind, name, ...refusal });
    throw error;
  }
}

/**
 * `boundSeenAt`: when this process first saw the pod bound to a node (milliseconds); without
 * it (a new leader) the PodScheduled condition's time is used, which has whole seconds only.
 */
export function podView(pod: V1Pod, boundSeenAt?: string): SandboxPodView {
  const scheduled = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled' && condition.status === 'True');
  const conditionTime = scheduled?.lastTransitionTime ? new Date(scheduled.lastTransitionTime).toISOString() : undefined;
  const scheduledAt = pod.spec?.nodeName ? (boundSeenAt ?? conditionTime) : undefined;
  const ready = pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
  const waiting = pod.status?.containerStatuses?.find((status) => status.state?.waiting)?.state?.waiting;
  const unschedulable = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled' && condition.status === 'False');
  const reason = pod.status?.reason ?? waiting?.reason ?? unschedulable?.reason;
  const message = pod.status?.message ?? waiting?.message ?? unschedulable?.message;
  return {
    name: pod.metadata!.name!,
    phase: pod.status?.phase ?? 'Pending',
    ready,
    deleting: pod.metadata?.deletionTimestamp !== undefined,
    ...(reason ? { reason } : {}),
    ...(message ? { message: message.slice(0, 512) } : {}),
    ...(scheduledAt ? { scheduledAt } : {}),
    ...(pod.metadata?.labels?.[CLAIMED_FROM_LABEL] ? { claimed: true } : {}),
    ...(pod.status?.startTime ? { startTime: new Date(pod.status.startTime).toISOString() } : {}),
    ...(pod.spec?.activeDeadlineSeconds !== undefined ? { activeDeadlineSeconds: pod.spec.activeDeadlineSeconds } : {}),
    ...(pod.metadata?.uid ? { uid: pod.metadata.uid } : {}),
  };
}

/** The referenced objects' keys read by one reconcile, by the objects the spec named (referenceNames). */
type ReadReferences = Map<string, NonNullable<ObservedRun['references']>>;

/** The Secrets and ConfigMaps the run's spec names, as one string to compare. */
function referenceNames(run: CodingRun): string {
  const parsed = parseSpec(run);
  return parsed.ok ? JSON.stringify(referencesOf(parsed.spec)) : '';
}

export class RunReconciler {
  /** Runs this process admitted whose new phase the cache may not show yet (maxActiveRuns). */
  readonly admittedLocally = new CountedSet<string>();
  /** Provisioning runs (by key) whose pod this process has seen bound to a node, and when (status.timings PodScheduled). */
  private readonly boundSeen = new Map<string, { uid: string; at: string }>();
  /** Slots this process granted (admission.ts) whose admission the cache does not show yet; in admittedLocally too. */
  private readonly grants = new CountedMap<string, Grant>();
  /**
   * The last admission this process granted or saw a run's status carry (AdmissionContext
   * lastAdmitted): raised, never lowered, so a run deleted as soon as it ended does not hand its
   * namespace's turn and its sequence number back. A new leader starts from its caches.
   */
  private lastAdmitted: LastAdmission | undefined;
  /**
   * Runs (by uid) whose status the API server would not store for their size (tooLargeToWrite),
   * their sandbox taken down: left out of the queue, or the oldest such run would be granted
   * every freed slot, again and again, and hold it. Looked at again once it may fit (a new
   * generation, or smaller); forgotten once the run is gone.
   */
  private readonly unwritable = new CountedMap<string, UnwritableMark>();
  /**
   * Working runs (by uid) whose sandbox tooLargeToWrite took down: what their ending says once
   * they can be written (ObservedRun.sandboxTakenDown), not that their pod disappeared. In memory
   * only, as the marks are: after a restart or a leader change the ending of such a run says its
   * pod disappeared, as it did before this was kept. Forgotten once the run has ended or is gone.
   */
  private readonly takenDown = new Map<string, SandboxTakenDown>();
  /**
   * Pool pods this process claimed, by run key, until the cache shows the claim (claimNotCached):
   * a decision made again after a conflict, or a reconcile redone after the write that records a
   * claim failed (a 500), must find this pod, not claim a second one while its agent starts in the first.
   */
  private readonly claimsMade = new Map<string, { uid: string; pod: V1Pod }>();
  /**
   * Seals each claim this process makes, and checks those any replica made (claimedPod): keyed by
   * config.stateKey, which every replica shares; without one, a key of this process alone.
   */
  private readonly claimSeal: WarmPoolClaimSeal;
  /** Runs (by key) whose fresh pod this process sent a create for, by uid: until the cache shows it (observed.freshPodSent). */
  private readonly freshPodsSent = new Map<string, string>();
  /** Pods and policies this process deleted, until the caches show it (each is deleted once). */
  private readonly deletions = new DeletionsSent();
  /**
   * The approval answer the last decision about each waiting run ignored (by run key, with the
   * run's uid), handed to its next decision: decide() warns of an ignored answer once, not at
   * every look while the run waits. In memory only: a new leader warns once more.
   */
  private readonly ignoredApprovals = new Map<string, { uid: string; ignored: IgnoredApproval }>();
  /** The answer the last decision about each waiting run passed on, and when first seen (decide.ts: past the timeout only one seen before it runs). */
  private readonly seenApprovals = new Map<string, { uid: string; seen: SeenApproval }>();
  /**
   * Runs the watch reported deleted without their finalizer path having stopped their agent, by
   * key and uid, as the cache last saw them: until the key's reconcile has stopped it (stopRunsGone).
   * Someone removed the finalizer (the usual fix for a "stuck" object); without this, the run's
   * state stayed in Redis with no TTL, and its bytes in its namespace's tally, for good.
   */
  private readonly gone = new Map<string, Map<string, CodingRun>>();
  /**
   * The gone runs (by uid) whose wait for their running jobs was logged: their key is looked at
   * every second meanwhile, and one line says why, not one a second. Forgotten with the run.
   */
  private readonly goneWaitLogged = new Set<string>();
  /**
   * Runs (by uid) whose finalizer this process removed: their agent was stopped with no job left
   * running, the condition the finalizer goes on, so their deletion has nothing more to stop.
   * Forgotten once the watch reports them deleted.
   */
  private readonly finalized = new Set<string>();
  /** The namespaces' sandbox policies this process made, until the cache shows them. */
  private readonly policiesMade: SandboxPoliciesMade;
  /**
   * Sandbox policies being made now, by `namespace/name`: the runs of a namespace are
   * reconciled side by side, and all but the first wait for its create instead of sending
   * their own (each would get a 409 and read the policy after it).
   */
  private readonly ensuring = new Map<string, Promise<void>>();
  private readonly now: () => Date;
  /** The diffs of runs this process ends, taken beside the reconciles (diff-takes.ts). */
  private readonly diffTakes: DiffTakes;
  private readonly plans: AdmissionPlanCache;
  /**
   * Namespaces (not a reconciled run's own) whose policy the last read could not get: their
   * waiting runs are out of admission until a read gets it. Kept to log each once, not at every
   * plan, and to wake none of their runs as a queue's head.
   */
  private readonly policyUnreadable = new Set<string>();

  constructor(private readonly deps: RunReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.plans = deps.admissionPlans ?? new AdmissionPlanCache({ changesReported: false });
    this.policiesMade = new SandboxPoliciesMade(deps.caches.networkPolicies);
    this.diffTakes = new DiffTakes((key) => this.deps.wake?.(key));
    this.claimSeal = deps.config.stateKey ? new WarmPoolClaimSeal(deps.config.stateKey) : WarmPoolClaimSeal.generated();
  }

  /**
   * The watch saw one of the operator's NetworkPolicies change. A namespace's sandbox policy
   * that is gone, or not as the operator makes it (someone edited it), is made again by the
   * next reconcile of a run there: wake the namespace's unfinished runs (a run's own policy
   * woke its run before; these have no owner to wake).
   */
  sandboxPolicyChanged(policy: V1NetworkPolicy, deleted: boolean): void {
    if (!isSandboxPolicyLabelled(policy)) return;
    const { namespace, name } = policy.metadata as { namespace: string; name: string };
    if (deleted) this.policiesMade.forget(namespace, name);
    const wanted = name === SANDBOX_DENY_ALL_POLICY ? sandboxDenyAllPolicy(namespace) : sandboxEgressPolicy(namespace, this.deps.config);
    if (!deleted && isSandboxPolicyAsWanted(policy, wanted)) return;
    for (const run of this.deps.caches.runs.list())
      if (run.metadata.namespace === namespace && !isTerminal(run.status?.phase)) this.deps.wake?.(`${namespace}/${run.metadata.name}`);
  }

  /**
   * A slot freed, a run was admitted or a new one arrived: wake the run each namespace serves
   * next (admission.ts queueHeads), not every queued run. Its reconcile hands out the free
   * slots and wakes the runs it grants them.
   */
  wakeQueueHeads(): void {
    const scope = this.planScope(this.policyUnreadable);
    const runs = this.deps.caches.runs.list();
    const seen = this.deps.listed || scope.unreadable.size > 0 ? runs.filter((run) => inPlanScope(run, scope)) : runs;
    for (const run of queueHeads(seen, this.admittedLocally)) this.deps.wake?.(`${run.metadata.namespace}/${run.metadata.name}`);
  }

  /**
   * The watch saw a run deleted; `run` is the last the cache had of it, the only place its uid
   * is still known (the work queue's key is its name). What this process holds of it goes now;
   * its agent is stopped by the key's next reconcile (stopRunsGone), unless its finalizer path here
   * did that already. Called before the key is queued.
   */
  runDeleted(run: CodingRun): void {
    const { uid, namespace, name } = run.metadata;
    this.lastAdmitted = laterAdmission(this.lastAdmitted, recordedAdmission(run));
    this.admittedLocally.delete(uid);
    this.grants.delete(uid);
    this.unwritable.delete(uid);
    this.takenDown.delete(uid);
    if (this.finalized.delete(uid)) return;
    const key = `${namespace}/${name}`;
    const ofKey = this.gone.get(key) ?? new Map<string, CodingRun>();
    ofKey.set(uid, run);
    this.gone.set(key, ofKey);
  }

  /** The namespace's sandbox policies as far as this process knows (the cache, or its own creates not in it yet). */
  private sandboxPolicies(namespace: string): V1NetworkPolicy[] {
    return [SANDBOX_DENY_ALL_POLICY, SANDBOX_EGRESS_POLICY].flatMap((name) => this.policiesMade.seen(namespace, name) ?? []);
  }

  /** Closed by stop(): no write is sent after it (write-gate.ts). */
  private readonly writes = new WriteGate();

  /** No reconcile writes anything after this, the ones in flight included; what they had sent stays sent. */
  stop(): void {
    this.writes.close();
  }

  private beforeWrite(): void {
    this.writes.check();
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number; forget?: boolean }> {
    return this.writes.unlessStopped(
      () => this.reconcileOnce(key),
      () => {
        this.deps.logger.info({ key }, 'reconcile stopped before its next write: this replica no longer leads');
        return {};
      },
    );
  }

  private async reconcileOnce(key: string): Promise<{ requeueAfterMs?: number; forget?: boolean }> {
    const [namespace, name] = key.split('/') as [string, string];
    const run = this.deps.caches.runs.get(namespace, name);
    // First, and failing the reconcile when Redis does (the queue backs off): a run made again
    // under the name waits behind its predecessor's stop, which needs the same Redis anyway.
    const jobsRunning = await this.stopRunsGone(key, run?.metadata.uid);
    const result = run ? await this.reconcileRun(key, run) : this.forgetKey(key);
    if (jobsRunning === 0) return result;
    // A job of a gone run still runs: it leaves its record when it ends, and nothing else wakes the key.
    return { requeueAfterMs: Math.min(result.requeueAfterMs ?? JOBS_RUNNING_RECHECK_MS, JOBS_RUNNING_RECHECK_MS) };
  }

  /**
   * Stops the agent of each run of this key the watch reported deleted (runDeleted), other than
   * the one the cache holds now (`current`); resolves to how many of their jobs still run. The
   * same stop as a deletion's (stopAgent): it removes the run's jobs, its state and its entry in
   * its namespace's tally, and is safe to repeat. A run is forgotten once none of its jobs runs.
   */
  private async stopRunsGone(key: string, current: string | undefined): Promise<number> {
    const ofKey = this.gone.get(key);
    if (!ofKey) return 0;
    let jobsRunning = 0;
    for (const [uid, run] of ofKey) {
      // Listed again under the same uid (a watch that reported it deleted in error): not gone.
      // Finalized here after all: the watch's report of its deletion came before the answer to
      // the write that removed its finalizer, whose reconcile this one follows.
      if (uid === current || this.finalized.delete(uid)) {
        ofKey.delete(uid);
        this.goneWaitLogged.delete(uid);
        continue;
      }
      this.beforeWrite();
      const left = await this.deps.agent.stop(run);
      jobsRunning += left;
      if (left > 0) {
        if (!this.goneWaitLogged.has(uid))
          this.deps.logger.info(
            { ...runLogFields(run), jobsRunning: left },
            `waiting for ${left} running job${left === 1 ? '' : 's'} of the deleted run to end before its agent is stopped for good`,
          );
        this.goneWaitLogged.add(uid);
        continue;
      }
      ofKey.delete(uid);
      this.goneWaitLogged.delete(uid);
      this.deps.logger.info(runLogFields(run), "stopped the agent of a run deleted without its finalizer's cleanup");
    }
    if (ofKey.size === 0) this.gone.delete(key);
    return jobsRunning;
  }

  /** The key's run is gone: what this process kept of it by its key goes too. */
  private forgetKey(key: string): { requeueAfterMs?: number; forget?: boolean } {
    this.boundSeen.delete(key);
    this.deletions.forgetRun(key);
    this.claimsMade.delete(key);
    this.freshPodsSent.delete(key);
    this.diffTakes.forget(key);
    this.ignoredApprovals.delete(key);
    this.seenApprovals.delete(key);
    return { forget: true };
  }

  private async reconcileRun(key: string, current: CodingRun): Promise<{ requeueAfterMs?: number; forget?: boolean }> {
    const { namespace, name } = current.metadata;
    let run = current;
    // Nothing can be written for it: only its deletion, a new spec or a smaller run (its labels
    // and annotations trimmed, which no generation counts) changes that.
    const mark = this.unwritable.get(run.metadata.uid);
    if (mark) {
      const seen = { generation: run.metadata.generation, bytes: runBytes(run), deleting: Boolean(run.metadata.deletionTimestamp) };
      if (stillUnwritable(mark, seen)) return { requeueAfterMs: TOO_LARGE_RECHECK_MS };
      this.unwritable.delete(run.metadata.uid);
    }
    if (isTerminal(run.status?.phase) || run.metadata.deletionTimestamp) this.takenDown.delete(run.metadata.uid);
    // What applying a decision taught, for deciding again: a name held by a foreign object,
    // an object the API server refused, the diff kept for a run being ended.
    const takenOnCreate: TakenName[] = [];
    const refused: RefusedObject[] = [];
    let keptDiff: KeptDiff | undefined;
    let warmClaim: WarmClaim | undefined;
    // The API server's answer to this reconcile's create or claim of the run's pod: the pod as
    // admitted, recorded by the status write (admitted-pod-record.ts), including one made again
    // after a conflict, when the cache may not show the pod yet.
    const answered: { pod?: PodSeen } = {};
    // The referenced Secrets' and ConfigMaps' keys, read by this reconcile's first look: a
    // decision made again after a claim or a kept diff does not read them again while the spec
    // names the same objects (one more request and 15-100 ms on a claimed run's way to its agent).
    const references: ReadReferences = new Map();
    for (let attempt = 0; ; attempt++) {
      this.beforeWrite();
      const observed = await this.observe(run, references);
      // The run as decided on: with the template it names recorded, while it is being accepted.
      run = observed.run;
      if (takenOnCreate.length > 0) observed.takenNames = [...(observed.takenNames ?? []), ...takenOnCreate];
      if (refused.length > 0) observed.refused = refused;
      if (keptDiff) observed.keptDiff = keptDiff;
      if (warmClaim) observed.warmClaim = warmClaim;
      const config = await this.configFor(observed);
      const now = this.now();
      let decision = decide(observed, config, now);
      // Past the timeout, an approve this process has no memory of (a new leader's first look):
      // the queue is asked whether it holds its job, once, and the run decided again knowing.
      if (decision.lookUpQueuedAnswer) {
        observed.answerQueued = await this.deps.agent.answerQueued(run, decision.lookUpQueuedAnswer);
        decision = decide(observed, config, now);
      }
      // Kept when decided, not once applied: a decision made again after a conflict (the agent
      // writes the status near an approval) may be past the timeout, and must still find the
      // answer seen before it.
      if (decision.seenApproval) this.seenApprovals.set(key, { uid: run.metadata.uid, seen: decision.seenApproval });
      else this.seenApprovals.delete(key);
      // A diff taken for an ending this decision no longer makes is not kept for a later one.
      if (!keptDiff && !decision.actions.some((action) => action.type === 'keepDiff')) this.diffTakes.dropUnclaimed(key);
      try {
        const applied = await this.apply(run, decision, observed.admission?.admit === false, answered, observed);
        run = applied.run;
        // Only once applied: a decision whose write met a conflict recorded no Event, and the next one must.
        if (decision.ignoredApproval) this.ignoredApprovals.set(key, { uid: run.metadata.uid, ignored: decision.ignoredApproval });
        else this.ignoredApprovals.delete(key);
        const requeueAfterMs = applied.requeueAfterMs ?? decision.requeueAfterMs;
        return requeueAfterMs !== undefined ? { requeueAfterMs } : {};
      } catch (error) {
        // Decide again knowing the name is taken: decide() fails the run and creates nothing.
        if (error instanceof NameTakenError && takenOnCreate.length === 0) {
          takenOnCreate.push(error.taken);
          continue;
        }
        if (error instanceof CreateRefusedError && refused.length === 0) {
          this.deps.logger.warn({ ...runLogFields(run), refused: error.refused }, 'the API server refused an object of the run');
          refused.push(error.refused);
          continue;
        }
        if (error instanceof WarmClaimSignal && !warmClaim) {
          warmClaim = error.claim;
          run = error.run;
          if ('pod' in warmClaim) {
            this.claimsMade.set(key, { uid: run.metadata.uid, pod: warmClaim.pod });
            answered.pod = { pod: warmClaim.pod, from: 'claim', freshName: sandboxPodName(run) };
          }
          continue;
        }
        if (error instanceof DiffKeptSignal && !keptDiff) {
          keptDiff = error.kept;
          continue;
        }
        // The diff is being taken (diff-takes.ts): its end wakes the run; the recheck is for a reconciler without wake.
        if (error instanceof DiffTakingSignal) return { requeueAfterMs: DIFF_TAKING_RECHECK_MS };
        if (!isConflict(error) || attempt >= MAX_CONFLICT_RETRIES) throw error;
        // Someone else (a worker, a user) changed the run: decide again on fresh state.
        const fresh = await this.deps.kube.getRun(namespace, name);
        // Another run under the name (this one deleted and made again meanwhile): what this
        // reconcile learned (a warm claim, the pod as answered, a kept diff) is the first
        // one's. The new run's watch event queues its own reconcile.
        if (!fresh || fresh.metadata.uid !== run.metadata.uid) return {};
        run = fresh;
        references.clear();
      }
    }
  }

  /**
   * The config to decide with: for a run with egress that may get its sandbox now, the proxy's
   * current address (a Service created again has a new ClusterIP). Not read for other runs, so
   * a proxy Service that cannot be read holds up only the sandboxes that need it (the error
   * retries with backoff, naming the Service).
   */
  private async configFor(observed: ObservedRun): Promise<OperatorConfig> {
    const { config, egressProxyAddress } = this.deps;
    const { run } = observed;
    const mayCreateSandbox = !observed.pod && !run.metadata.deletionTimestamp && !isTerminal(run.status?.phase) && hasEgress(run);
    if (!egressProxyAddress || !mayCreateSandbox) return config;
    return { ...config, egressProxy: { ...config.egressProxy, address: await egressProxyAddress.get() } };
  }

  /**
   * `references`: the keys this reconcile already read, used instead of reading them again while
   * the spec names the same objects (what this look reads is added).
   */
  private async observe(current: CodingRun, references: ReadReferences): Promise<ObservedRun> {
    const { caches } = this.deps;
    const { namespace } = current.metadata;
    // spec.templateRef: the template is read once, while the run is being accepted; the status
    // write that accepts (or refuses) the run records it, and nothing reads it again.
    const templateName = templateToRead(current);
    const run = templateName ? withTemplate(current, await this.deps.templates?.get(namespace, templateName)) : current;
    const owned = ownedBy(run);
    const found = caches.pods.get(namespace, runPodName(run)) ?? this.claimedPod(run);
    const pod = this.claimNotCached(run, owned(found)) ?? found;
    const networkPolicy = caches.networkPolicies.get(namespace, networkPolicyName(run));
    // What this process already deleted counts as being deleted (the pod) or gone (the policy).
    const key = `${namespace}/${run.metadata.name}`;
    const podDeleted = pod !== undefined && this.deletions.deleted(key, 'Pod', pod.metadata!.name!, pod);
    const policyDeleted = this.deletions.deleted(key, 'NetworkPolicy', networkPolicyName(run), networkPolicy);
    const takenNames = takenName(run, 'Pod', pod);
    const ignored = this.ignoredApprovals.get(key);
    const seen = this.seenApprovals.get(key);
    const takenDown = this.takenDown.get(run.metadata.uid);
    if (pod || this.freshPodsSent.get(key) !== run.metadata.uid) this.freshPodsSent.delete(key);
    const freshPodSent = this.freshPodsSent.has(key);
    // Only a deletion acts on them, and finding them means scanning every cached ConfigMap
    // (one diff per finished run): done on every reconcile, as it was, N runs cost N². One this
    // process deleted is gone, as a deleted policy is: a deletion deletes a few at each
    // reconcile (decide.ts CONFIG_MAP_DELETES_PER_RECONCILE), and the next must go on to the
    // next few, not send the same DELETEs again to a cache the watch has not caught up.
    const ownedConfigMaps = run.metadata.deletionTimestamp
      ? caches.configMaps
          .list()
          .filter(
            (configMap) =>
              configMap.metadata?.namespace === namespace &&
              owned(configMap) &&
              !this.deletions.deleted(key, 'ConfigMap', configMap.metadata.name!, configMap),
          )
          .map((configMap) => configMap.metadata!.name!)
      : [];
    const waiting = !isTerminal(run.status?.phase) && !run.metadata.deletionTimestamp && (run.status?.phase ?? 'Pending') === 'Pending';
    const needsValidation = waiting && findCondition(run.status?.conditions, 'Accepted')?.status !== 'True';
    // spec.continueFrom's run: while the run is accepted, and in any phase for one accepted
    // without its pin (decide.ts pins it then: a warm claim's write lost to a conflict).
    // Only a run whose own spec or template may name one is parsed for it: every look of every
    // running run would otherwise parse its whole spec (issue #17's step cost).
    const mayContinue = run.spec?.continueFrom !== undefined || run.status?.template?.spec?.continueFrom !== undefined;
    const unpinned = mayContinue && !isTerminal(run.status?.phase) && !run.metadata.deletionTimestamp && !run.status?.continuedFrom;
    const continueFrom = needsValidation || unpinned ? observeContinueFromSource(run, caches.runs) : {};
    const started = !run.metadata.deletionTimestamp && (run.status?.phase === 'Running' || run.status?.phase === 'WaitingForApproval');
    const agent = started ? await this.deps.agent.inspect(run) : undefined;
    // Asked only for runs not yet given a sandbox: asking may start a probe of the namespace.
    const isolation =
      waiting && needsIsolationProbe(this.deps.config)
        ? (this.deps.isolation?.observe(namespace) ?? {
            verdict: 'unknown' as const,
            detail: 'this operator process runs no isolation probe',
          })
        : undefined;
    // decide.ts looks at the isolation gate before a slot: a run the gate holds is not admitted
    // whatever the queue, so it gets no plan. The shared plan leaves such runs out
    // (admission.ts isWaiting), and each look of one, every ISOLATION_RECHECK_MS, made a plan
    // of its own: 4000 of them behind a probe kept unknown cost a core.
    const wantsSlot = waiting && isolationGate(isolation, this.deps.config, namespace).kind === 'open';
    return {
      run,
      ...(owned(pod) ? { pod: { ...podView(pod!, this.noteBound(run, pod!)), ...(podDeleted ? { deleting: true } : {}) } } : {}),
      networkPolicyExists: owned(networkPolicy) && !policyDeleted,
      ...(this.deps.config.networkPolicy && !isTerminal(run.status?.phase) && !run.metadata.deletionTimestamp
        ? { sandboxPolicies: this.sandboxPolicies(namespace) }
        : {}),
      ...(takenNames.length > 0 ? { takenNames } : {}),
      ...(freshPodSent ? { freshPodSent } : {}),
      ownedConfigMaps,
      ...(needsValidation ? { references: await this.referencesOf(run, references), objectBytes: runBytes(run) } : {}),
      ...continueFrom,
      ...(needsValidation ? finishedBefore(caches.finishedRuns.get(namespace, FINISHED_RUNS_CONFIG_MAP), run.metadata.name) : {}),
      ...(wantsSlot ? await this.observeAdmission(run) : needsValidation ? await this.namespacePolicyOf(run) : {}),
      ...(agent ? { agent } : {}),
      ...(isolation ? { isolation } : {}),
      ...(ignored?.uid === run.metadata.uid ? { ignoredApproval: ignored.ignored } : {}),
      ...(seen?.uid === run.metadata.uid ? { seenApproval: seen.seen } : {}),
      ...(takenDown ? { sandboxTakenDown: takenDown } : {}),
    };
  }

  /** Whether the namespace's sandbox deny-all is in place as wanted (the cache, or made by this process). */
  private denyAllInPlace(namespace: string): boolean {
    return (
      !this.deps.config.networkPolicy ||
      isSandboxPolicyAsWanted(this.policiesMade.seen(namespace, SANDBOX_DENY_ALL_POLICY), sandboxDenyAllPolicy(namespace))
    );
  }

  /**
   * Creates one of a namespace's sandbox policies, or replaces one the operator made that
   * differs (another egress proxy, someone's edit). A name held by a policy without the
   * operator's labels fails the run: its rules are someone else's, and the operator neither
   * trusts them nor overwrites them.
   */
  private ensureSandboxPolicy(policy: V1NetworkPolicy): Promise<void> {
    const { namespace, name } = policy.metadata as { namespace: string; name: string };
    const key = `${namespace}/${name}`;
    const inFlight = this.ensuring.get(key);
    if (inFlight) return inFlight;
    // Made since this run was observed (by another run's reconcile that has finished).
    if (isSandboxPolicyAsWanted(this.policiesMade.seen(namespace, name), policy)) return Promise.resolve();
    const made = this.makeSandboxPolicy(policy).finally(() => this.ensuring.delete(key));
    this.ensuring.set(key, made);
    return made;
  }

  private async makeSandboxPolicy(policy: V1NetworkPolicy): Promise<void> {
    const name = policy.metadata!.name!;
    const fields = { namespace: policy.metadata!.namespace, networkPolicy: name };
    const holder = await createOrRefuse('NetworkPolicy', name, () => this.deps.kube.createNetworkPolicy(policy));
    if (!holder) this.deps.logger.info(fields, 'made a sandbox NetworkPolicy');
    else this.deps.logger.info(fields, 'a sandbox NetworkPolicy was there already');
    if (holder && !isSandboxPolicyAsWanted(holder, policy)) {
      if (!isSandboxPolicyLabelled(holder)) {
        const why = "it lacks the operator's labels (app.kubernetes.io/managed-by: chamvi-operator, chamvi.dev/sandbox-policy)";
        throw new NameTakenError({ kind: 'NetworkPolicy', name, why });
      }
      const replacement = { ...policy, metadata: { ...policy.metadata, resourceVersion: holder.metadata?.resourceVersion } };
      await createOrRefuse('NetworkPolicy', name, () => this.deps.kube.replaceNetworkPolicy(replacement));
      this.deps.logger.info(fields, 'replaced a sandbox NetworkPolicy that was not as the operator makes it');
    }
    this.policiesMade.note(policy);
  }

  /**
   * A pool pod this run claimed whose name its status does not hold yet (the claim's status
   * write was lost): found by what the claim left on it, so a redone claim does not take a
   * second pod. Also for a run the workers moved on to Running before that write landed (it met
   * a conflict after the agent was started): its status names no pod, and the pod it runs in is
   * this one, not one of its derived name. Only a pod that carries a pool's claim for this run
   * (claimOf), of a pool of the run's namespace, and that the operator claimed: its seal
   * (warm-pool-claim-seal.ts) verifies for the pod's own uid, this run and that pool, whichever
   * replica claimed it, or this process's pool loop made it. Labels and a copied controller
   * ownerReference are anyone's who may create pods, and a pod planted so (its probes and hooks
   * of its maker's choosing) was taken as the run's sandbox, the agent started in it. By the loop's
   * memory alone, a new leader did not know a pod its predecessor claimed and sent the prepare job
   * to before it stopped: the run was given a fresh pod too, prepared in one, stepped in the other.
   * Without such a pod the run makes its own, as without pools.
   * A finished run's, or one being deleted, is any pod it controls that a claim marked for it,
   * whoever made it, but the one its status names (found first): only deleted, as its fresh pod
   * is, one per reconcile (each pod's deletion wakes the run). A pod claimed for a run that ended
   * before its status named the pod, or given to it beside the named one, otherwise lived on
   * until its activeDeadlineSeconds.
   */
  private claimedPod(run: CodingRun): V1Pod | undefined {
    const warm = this.deps.warmPools;
    if (!warm) return undefined;
    const { namespace } = run.metadata;
    const phase = run.status?.phase;
    const owned = (pod: V1Pod) => pod.metadata?.namespace === namespace && ownedBy(run)(pod);
    if (isTerminal(phase) || run.metadata.deletionTimestamp) {
      return this.deps.caches.pods
        .list()
        .find(
          (pod) => owned(pod) && pod.metadata?.name !== run.status?.podName && pod.metadata?.labels?.[CLAIMED_FROM_LABEL] !== undefined,
        );
    }
    const beforeTheAgent = phase === undefined || phase === 'Pending' || phase === 'Provisioning';
    if (!beforeTheAgent && run.status?.podName) return undefined;
    const pools = this.deps.config.warmPools.filter((pool) => pool.namespace === namespace);
    if (pools.length === 0) return undefined;
    return this.deps.caches.pods.list().find((pod) => {
      const claim = owned(pod) ? claimOf(pod, pools) : undefined;
      return (
        claim !== undefined &&
        claim.runUid === run.metadata.uid &&
        (this.claimSeal.verifies(pod, run.metadata.uid, claim.pool) || warm.madeIt(pod, claim.pool))
      );
    });
  }

  /**
   * The pool pod this process claimed for the run, as the claim's answer has it, while the
   * cache shows no pod of the run (`cached`): a decision made again after a conflict, or a
   * reconcile redone after the write that records the claim failed, may come before the watch
   * has brought it. Forgotten once the cache shows the run's pod, or the run is gone.
   */
  private claimNotCached(run: CodingRun, cached: boolean): V1Pod | undefined {
    const key = `${run.metadata.namespace}/${run.metadata.name}`;
    const made = this.claimsMade.get(key);
    if (!made) return undefined;
    if (cached || made.uid !== run.metadata.uid) {
      this.claimsMade.delete(key);
      return undefined;
    }
    return made.pod;
  }

  /**
   * Claims a ready pod of the pool for the run: best first (claimOrder), each claim one
   * patch the API server applies only while the pod still has its pool label. A pod another
   * claimer took, or one changed since the cache showed it (its resourceVersion), fails its test
   * and the next is tried. A claim the API server refused (a 4xx: a policy, a pod-UPDATE webhook
   * that denies; or a 500 from a webhook it could not call) claims nothing, and the run takes a
   * fresh pod at once, as from an empty pool: re-thrown, the refusal failed every reconcile of
   * the run, which got no phase and held its slot for as long as the refusal lasted. Any other
   * 5xx (a 504, an etcd timeout) may have claimed the pod after all, later than the read back
   * shows: the claim is fenced off (warm-pool-claim-fence.ts: the pool pod deleted as the claim
   * judged it, then read again), and the run goes on in the pod if the claim landed first, or
   * takes a fresh pod at once if not; retried instead, a 5xx that lasted kept the run in its
   * phase, its slot held, for as long as it lasted. A fence that gets no answer either, or a
   * claim that got no answer at all (the connection dropped), is thrown, and the retry finds the
   * pod by its seal if the claim landed (claimedPod).
   */
  private async claimWarmPod(run: CodingRun, pool: WarmPoolConfig, runDeadlineSeconds: number): Promise<WarmClaim> {
    const warm = this.deps.warmPools!;
    const parsed = parseSpec(run);
    if (!parsed.ok) return { none: true };
    const pods = this.deps.caches.pods.list().filter((pod) => warm.madeIt(pod, pool) && isPoolPod(pod, pool, this.deps.config));
    const byName = new Map(pods.map((pod) => [pod.metadata!.name!, pod]));
    const now = this.now();
    for (const name of claimOrder(pods.map(poolPodView)).slice(0, CLAIM_TRIES)) {
      const seen = byName.get(name)!;
      // activeDeadlineSeconds counts from the pod's start, not the claim: add the time it waited warm.
      const started = Date.parse(String(seen.status?.startTime ?? now.toISOString()));
      const deadline = runDeadlineSeconds + Math.max(0, Math.ceil((now.getTime() - started) / 1000));
      const podUid = seen.metadata!.uid!;
      const patch = claimPatch({ ...run, spec: parsed.spec } as ParsedCodingRun, pool, deadline, podUid, {
        ...(seen.metadata?.resourceVersion === undefined ? {} : { resourceVersion: seen.metadata.resourceVersion }),
        seal: this.claimSeal.seal({ podUid, runUid: run.metadata.uid, pool }),
        annotated: seen.metadata?.annotations !== undefined,
      });
      // The claim landed: the pod read back is the one it tested (its uid), and carries what it
      // wrote, seal included, as claimedPod asks of a pod found later. Labels and a copied
      // controller ownerReference are anyone's who may create or patch pods: a pod made at the
      // name since, or the pool pod patched so, was taken as the run's sandbox on them alone.
      const landed = (pod: V1Pod) =>
        pod.metadata?.uid === podUid &&
        isOwnedByRun(pod, run) &&
        claimOf(pod, [pool])?.runUid === run.metadata.uid &&
        this.claimSeal.verifies(pod, run.metadata.uid, pool);
      const claimed = await warm.gateway.claimPod(pool.namespace, name, patch).catch(async (error: unknown) => {
        // No answer (a timeout, a 5xx): the patch may have landed. Retried on the cache, which
        // still shows the pod unclaimed, the run claimed a second pool pod and lost the first.
        // The pod as the API server has it now says which.
        const podNow = await warm.gateway.readPod(pool.namespace, name);
        if (podNow && landed(podNow)) return podNow;
        const refusal = apiRefusal(error) ?? webhookFailure(error);
        if (refusal) return new ClaimRefused(refusal);
        const unanswered = apiServerFailure(error);
        if (!unanswered) throw error;
        const fenced = await fenceUnansweredClaim(warm.gateway, seen, landed).catch((fenceError: unknown) => {
          this.deps.logger.warn(
            {
              ...runLogFields(run),
              pool: `${pool.namespace}/${pool.name}`,
              pod: name,
              code: unanswered.code,
              err: fenceError instanceof Error ? fenceError.message : String(fenceError),
            },
            'could not fence off the claim of a warm pool pod whose answer was lost: the reconcile is retried',
          );
          throw error;
        });
        if ('claimed' in fenced) return fenced.claimed;
        return new ClaimRefused(unanswered, true);
      });
      if (claimed instanceof ClaimRefused) {
        const fields = {
          ...runLogFields(run),
          pool: `${pool.namespace}/${pool.name}`,
          pod: name,
          code: claimed.code,
          err: claimed.message,
        };
        if (claimed.fenced)
          this.deps.logger.warn(
            fields,
            'the claim of a warm pool pod got no answer: the pod was deleted so the claim cannot land later, and the run takes a fresh pod',
          );
        else this.deps.logger.warn(fields, 'the API server refused the claim of a warm pool pod: the run takes a fresh pod');
        return { none: true };
      }
      if (claimed) {
        warm.onClaim?.(pool, name);
        return { podName: name, pod: claimed };
      }
    }
    return { none: true };
  }

  /** When this process first saw the Provisioning run's pod bound to a node; forgotten once the run is past Provisioning. */
  private noteBound(run: CodingRun, pod: V1Pod): string | undefined {
    const key = `${run.metadata.namespace}/${run.metadata.name}`;
    if (run.status?.phase !== 'Provisioning' || run.metadata.deletionTimestamp) {
      this.boundSeen.delete(key);
      return undefined;
    }
    // Seen bound and already Ready in one look (a fast kubelet): this process cannot tell when
    // it was bound, the pod's condition can (to the second).
    const ready = pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True');
    // By uid too: a run deleted and made again under its name before a reconcile saw it gone
    // would have taken the old one's time (and negative durations in its timings).
    const seen = this.boundSeen.get(key);
    if (seen?.uid === run.metadata.uid) return seen.at;
    if (pod.spec?.nodeName && !ready) {
      const at = this.now().toISOString();
      this.boundSeen.set(key, { uid: run.metadata.uid, at });
      return at;
    }
    this.boundSeen.delete(key);
    return undefined;
  }

  /**
   * Reads each waiting namespace's policy and today's tally first, then decides at once from
   * the cache: no await between the decision and its use, so runs reconciled side by side
   * see the same queue. The plan is the one kept (admission-plan-cache.ts) while nothing it
   * was made from has moved: one plan serves every queued run's recheck.
   */
  private async observeAdmission(run: CodingRun): Promise<Pick<ObservedRun, 'admission' | 'namespacePolicy'>> {
    const view = await this.fairShareView(run);
    const made = this.plans.admissionOf(
      run,
      view,
      () => this.admittedLocally.changes + this.grants.changes + this.unwritable.changes,
      () => {
        const cached = this.deps.caches.runs.list();
        for (const other of cached) this.lastAdmitted = laterAdmission(this.lastAdmitted, recordedAdmission(other));
        const scope = this.planScope(view.unreadable);
        this.forgetSettledGrants(cached, scope);
        const runs = cached.filter((other) => !this.unwritable.has(other.metadata.uid) && inPlanScope(other, scope));
        const { config } = this.deps;
        return {
          runs,
          context: {
            maxActiveRuns: config.maxActiveRuns,
            ...(config.namespaceMaxActiveRuns !== undefined ? { namespaceMaxActiveRuns: config.namespaceMaxActiveRuns } : {}),
            admittedLocally: this.admittedLocally,
            holdsSandbox: (other) => this.sandboxUp(other),
            policies: view.policies,
            budgets: view.budgets,
            grants: this.grants,
            ...(this.lastAdmitted ? { lastAdmitted: this.lastAdmitted } : {}),
          },
        };
      },
    );
    // Granted a slot by a plan made on an older tally, the run's namespace has spent its tokens
    // since: the run is held as it would be without the grant, and its slot is free again.
    if (made.withdrawn) {
      this.grants.delete(made.withdrawn.uid);
      this.admittedLocally.delete(made.withdrawn.uid);
    }
    for (const grant of made.granted) {
      this.lastAdmitted = laterAdmission(this.lastAdmitted, grant);
      this.grants.set(grant.uid, grant);
      this.admittedLocally.add(grant.uid);
      if (grant.uid !== run.metadata.uid) this.deps.wake?.(`${grant.namespace}/${grant.name}`);
    }
    const namespacePolicy = view.policies.get(run.metadata.namespace);
    return { admission: made.admission, ...(namespacePolicy ? { namespacePolicy } : {}) };
  }

  /** The run's namespace's policy alone, for validating a run that does not ask for a slot yet. */
  private async namespacePolicyOf(run: CodingRun): Promise<Pick<ObservedRun, 'namespacePolicy'>> {
    const namespacePolicy = await this.deps.fairShare?.policyOf(run.metadata.namespace);
    return namespacePolicy ? { namespacePolicy } : {};
  }

  /** What admission leaves out now (admission.ts inPlanScope). */
  private planScope(unreadable: ReadonlySet<string>): PlanScope {
    return { listed: this.deps.listed ?? (() => true), unreadable, admittedLocally: this.admittedLocally };
  }

  /**
   * The policy and today's tally of each namespace with waiting runs (the run's own among them),
   * but a namespace that has not listed (out of the plans whatever its policy). Another
   * namespace's policy that cannot be read leaves that namespace's waiting runs out of the plan
   * (view.unreadable): a tenant who deleted the operator's RoleBinding in their namespace while
   * it leads made every waiting run's admission, in every namespace, fail with that read. The
   * run's own namespace's failing fails its reconcile (retried with backoff), as it must: its
   * caps and budget are unknown.
   */
  private async fairShareView(run: CodingRun): Promise<FairShareView> {
    const fairShare = this.deps.fairShare;
    if (!fairShare) return NO_FAIR_SHARE;
    const own = run.metadata.namespace;
    const listed = this.deps.listed;
    const cached = this.plans.waitingNamespaces(() => this.deps.caches.runs.list());
    const waiting = listed ? new Set([...cached].filter((namespace) => listed(namespace))) : cached;
    const namespaces = waiting.has(own) ? waiting : new Set([...waiting, own]);
    const day = utcDay(this.now());
    return this.plans.fairShareOf(
      namespaces,
      day,
      async (wanted) => {
        const policies = new Map<string, NamespacePolicy>();
        const budgets = new Map<string, TokenBudgetView>();
        const unreadable = new Set<string>();
        await Promise.all(
          [...wanted].map(async (namespace) => {
            let policy: NamespacePolicy;
            try {
              policy = await fairShare.policyOf(namespace);
            } catch (error) {
              if (namespace === own) throw error;
              unreadable.add(namespace);
              this.notePolicyUnreadable(namespace, error);
              return;
            }
            this.notePolicyRead(namespace);
            policies.set(namespace, policy);
            if (policy.tokensPerDay !== undefined)
              budgets.set(namespace, { tokensPerDay: policy.tokensPerDay, usedToday: await fairShare.tokensOn(namespace, day), day });
          }),
        );
        // A namespace no longer asked about (no run of it waits) is forgotten: logged again if it comes back unreadable.
        for (const namespace of this.policyUnreadable) if (!wanted.has(namespace)) this.policyUnreadable.delete(namespace);
        return { policies, budgets, unreadable };
      },
      own,
    );
  }

  /** A namespace's policy could not be read for another's run: said once, until a read gets it. */
  private notePolicyUnreadable(namespace: string, error: unknown): void {
    if (this.policyUnreadable.has(namespace)) return;
    this.policyUnreadable.add(namespace);
    this.deps.logger.warn(
      { namespace, code: statusCodeOf(error), err: (error instanceof Error ? error.message : String(error)).slice(0, 200) },
      "cannot read a namespace's settings (its annotations): its waiting runs are admitted nothing and take no turn until it can, and the other namespaces' runs go on. " +
        "If the answer is 403, the operator's RoleBinding in it is gone: restore it (helm upgrade makes it again), or remove the namespace from watchNamespaces",
    );
  }

  private notePolicyRead(namespace: string): void {
    if (this.policyUnreadable.delete(namespace))
      this.deps.logger.info({ namespace }, "a namespace's settings can be read again: its waiting runs are admitted again");
  }

  /**
   * A grant is done once the cache shows the run admitted (or ended, or gone); until then it holds
   * the run's slot and sequence. A grant of a run of a namespace that has not listed goes unused
   * (its keys are held): it is dropped, and the run counts as taking no slot, or unused grants
   * filled maxActiveRuns. Not one of a namespace whose policy cannot be read: the run may have
   * been admitted already (its status write sent, its watch update not in), and dropping the
   * grant on a transient 5xx would give its slot to another run.
   */
  private forgetSettledGrants(runs: readonly CodingRun[], scope: PlanScope): void {
    if (this.grants.size === 0 && this.unwritable.size === 0 && this.takenDown.size === 0) return;
    const byUid = new Map(runs.map((other) => [other.metadata.uid, other]));
    for (const uid of this.unwritable.keys()) if (!byUid.has(uid)) this.unwritable.delete(uid);
    for (const uid of this.takenDown.keys()) if (!byUid.has(uid)) this.takenDown.delete(uid);
    for (const [uid, grant] of this.grants) {
      const other = byUid.get(uid);
      const phase = other?.status?.phase;
      if (
        !other ||
        other.metadata.deletionTimestamp ||
        (phase !== undefined && phase !== 'Pending') ||
        other.status?.admission?.sequence === grant.sequence
      ) {
        this.grants.delete(uid);
        if (!other) this.admittedLocally.delete(uid);
      } else if (!scope.listed(grant.namespace)) {
        this.grants.delete(uid);
        this.admittedLocally.delete(uid);
      }
    }
  }

  /** The run's own sandbox pod exists and is not being deleted (it still holds a maxActiveRuns slot). */
  private sandboxUp(run: CodingRun): boolean {
    const pod = this.deps.caches.pods.get(run.metadata.namespace, runPodName(run));
    return pod !== undefined && !pod.metadata?.deletionTimestamp && ownedBy(run)(pod);
  }

  /** The keys of the objects the spec names: read already by this reconcile, or read now and kept in `read`. */
  private async referencesOf(run: CodingRun, read: ReadReferences): Promise<ReferencedObjects> {
    const names = referenceNames(run);
    const known = read.get(names);
    if (known) return known;
    const found = await this.readReferences(run);
    read.set(names, found);
    return found;
  }

  /** Only the objects the spec names, only in the run's own namespace, only their keys (and a Secret's labels). */
  private async readReferences(run: CodingRun): Promise<ReferencedObjects> {
    const found: ReferencedObjects = { secrets: {}, configMaps: {}, secretLabels: {} };
    const parsed = parseSpec(run);
    if (!parsed.ok) return found;
    for (const reference of referencesOf(parsed.spec)) {
      const namespace = run.metadata.namespace;
      if (reference.kind === 'Secret') {
        const secret = await this.deps.kube.secretKeysAndLabels(namespace, reference.name);
        found.secrets[reference.name] = secret?.keys;
        if (secret) found.secretLabels![reference.name] = secret.labels;
      } else found.configMaps[reference.name] = await this.deps.kube.configMapKeys(namespace, reference.name);
    }
    return found;
  }

  /**
   * `observedQueued`: the decision saw the run waiting without a slot (so a Pending it writes gives nothing back).
   * `answered`: the pod as the API server answered this reconcile's create or claim of it (a create here sets it).
   * `sandbox`: the run's pod and policy as the decision observed them (taken down if the status cannot be written).
   */
  private async apply(
    run: CodingRun,
    decision: Decision,
    observedQueued: boolean,
    answered: { pod?: PodSeen } = {},
    sandbox: Pick<ObservedRun, 'pod' | 'networkPolicyExists'> = { networkPolicyExists: false },
  ): Promise<{ run: CodingRun; requeueAfterMs?: number }> {
    const { kube } = this.deps;
    // A run that this decision ends is ended (status written) before its agent and sandbox
    // are stopped: a worker that found its state or pod gone first would end the run
    // itself, with the wrong reason (StateLost for a lost pod).
    const ending = isTerminal(decision.status?.phase) && !isTerminal(run.status?.phase);
    const afterStatus = ending ? decision.actions.filter((action) => STOPPING.has(action.type)) : [];
    let jobsRunning = 0;
    // A deletion's stop that failed (Redis down): the pod, its policy and the ConfigMaps are
    // deleted all the same, or the model's processes ran on in the pod until Redis came back.
    // The finalizer stays (the agent's jobs and state are not known gone) and the error fails
    // the reconcile once the rest is applied, so the stop is tried again with backoff.
    let stopFailed: { error: unknown } | undefined;
    // A pool pod is claimed only once the namespace's sandbox deny-all is in place at the API
    // server (in the cache, or made by an earlier action of this decision): the claim gives the
    // pod the run's uid label, which it selects, and the agent (clone, setup, tools) starts after
    // the claim. (The pool's own deny-all selects the pod throughout.)
    for (const action of decision.actions) {
      if (afterStatus.includes(action)) continue;
      this.beforeWrite();
      if (action.type === 'claimWarmPod' && !this.denyAllInPlace(run.metadata.namespace)) {
        this.deps.logger.warn(runLogFields(run), "no warm pod claimed: the namespace's sandbox NetworkPolicy is not in place yet");
        throw new WarmClaimSignal({ none: true }, run);
      }
      if (action.type === 'stopAgent') {
        try {
          jobsRunning = await this.deps.agent.stop(run);
        } catch (error) {
          if (!run.metadata.deletionTimestamp) throw error;
          stopFailed = { error };
        }
        continue;
      }
      if (action.type === 'removeFinalizer' && stopFailed) continue;
      if (action.type === 'deleteRun' && action.record && !(await this.keepFinishedRecord(run, action.record))) {
        return { run, requeueAfterMs: FINISHED_RECORD_RECHECK_MS };
      }
      // Deleting: a job of the run still runs, and would leave its record (and maybe a next
      // job) in Redis once it ends. The finalizer stays until it has ended and is removed.
      if (action.type === 'removeFinalizer' && jobsRunning > 0) {
        this.deps.logger.info({ ...runLogFields(run), jobsRunning }, "deletion waits for the run's running jobs");
        return { run, requeueAfterMs: JOBS_RUNNING_RECHECK_MS };
      }
      if (action.type === 'createPod' || action.type === 'claimWarmPod') this.useGrant(run);
      run = await this.applyAction(run, action, answered);
      if (action.type === 'removeFinalizer') this.finalized.add(run.metadata.uid);
    }
    if (stopFailed) {
      this.deps.logger.warn(
        { ...runLogFields(run), error: String(stopFailed.error) },
        "the deleted run's agent could not be stopped; its sandbox was deleted, and the finalizer stays until the stop succeeds",
      );
      throw stopFailed.error;
    }
    const changes = decision.actions.filter((action) => action.type !== 'stopAgent').map((action) => action.type);
    if (changes.length > 0)
      this.deps.logger.info(
        { ...runLogFields(run), phase: decision.status?.phase ?? run.status?.phase, actions: changes },
        'applied actions',
      );
    // The pod the status names, as admitted (status.admittedPod), written with it: the workers' check before each exec compares with it.
    // Only from this reconcile's create or claim answer, never the cache: a pod planted at the name reads as the run's (admitted-pod-record.ts).
    // What its init containers ran is the kubelet's report, taken from the cached pod of the record's uid only (withRanImages).
    const admitted = decision.status && withAdmittedPod(decision.status, answered.pod);
    const podCached = admitted?.podName === undefined ? undefined : this.deps.caches.pods.get(run.metadata.namespace, admitted.podName);
    const status = admitted && withRanImages(admitted, podCached, this.deps.config.sandboxImage);
    if (status && !isDeepStrictEqual(status, run.status ?? {})) {
      this.beforeWrite();
      const wasActive = isActive(run, this.admittedLocally);
      const timingsBefore = run.status?.timings;
      if (status.admission !== undefined) this.useGrant(run, status.admission.sequence);
      try {
        run = await kube.replaceRunStatus(run, status);
      } catch (error) {
        if (!isTooLargeToStore(error)) throw error;
        const agentStarted = run.status?.phase !== undefined && run.status.phase !== 'Pending';
        return await this.tooLargeToWrite(run, sandbox, answered, agentStarted || decision.actions.some(startsAgent));
      }
      this.deps.metrics?.observePhases(addedTimings(timingsBefore, status.timings));
      if ((status.phase === 'Provisioning' || status.phase === 'Running') && !wasActive) this.admittedLocally.add(run.metadata.uid);
      this.deps.logger.info({ ...runLogFields(run), phase: status.phase, reason: status.reason }, 'status written');
    }
    // The decision's Events go with its status write, before the stopping actions: a stop that
    // fails is retried by a decision about a finished run, which has no Events to record.
    for (const event of decision.events) await this.deps.events.record(run, event);
    for (const action of afterStatus) {
      this.beforeWrite();
      run = await this.applyAction(run, action);
    }
    // A run sent back to Pending (its pod refused) holds no slot either. A Pending written by a
    // decision that did not see the run admitted (it was observed queued, and another run's plan
    // granted it a slot meanwhile) sends nothing back: the grant made since stays, or the run
    // would lose its turn and its sequence number would be skipped.
    const holdsNoSlot =
      isTerminal(run.status?.phase) || (run.status?.phase === 'Pending' && !observedQueued) || run.metadata.deletionTimestamp;
    if (holdsNoSlot) {
      this.admittedLocally.delete(run.metadata.uid);
      this.grants.delete(run.metadata.uid);
    }
    return { run };
  }

  /**
   * Marks the run's grant used (admission.ts Grant.used) before a write that acts on it goes
   * out: its pod's create or claim, or a status write admitting it with the grant's sequence
   * (`sequence` given: only that one). Not after the answer: a write that fails (a 409, a
   * timeout) may have landed, the pod may be up, and a later look that found the namespace's
   * tokens spent would give the slot to another run as well.
   */
  private useGrant(run: CodingRun, sequence?: number): void {
    const grant = this.grants.get(run.metadata.uid);
    if (grant && !grant.used && (sequence === undefined || sequence === grant.sequence))
      this.grants.set(grant.uid, { ...grant, used: true });
  }

  /**
   * A run the API server will not store any write of: created just under etcd's limit, too close
   * for even the refusal decide() writes, or grown there after it was accepted (its labels and
   * annotations, which no generation counts and nothing measures once a run is accepted). It can
   * get no phase, so its sandbox is taken down as a refused run's is (unwritable-run.ts): the pod
   * this reconcile created or claimed before the write that would have admitted the run, or the
   * pod of a run that had started, and its agent. Only then is its slot given back: a pod left up
   * was counted by nothing, never reconciled again, and lived until its activeDeadlineSeconds, as
   * many as its author padded runs. A teardown that fails fails the reconcile, retried with
   * backoff while the slot is still held. The run gets a Warning Event (an Event is an object of
   * its own, stored whatever the run's size) and is looked at again once it may fit, or now and
   * then, not at every backoff with a request of its whole size.
   */
  private async tooLargeToWrite(
    run: CodingRun,
    sandbox: Pick<ObservedRun, 'pod' | 'networkPolicyExists'>,
    answered: { pod?: PodSeen },
    agentStarted: boolean,
  ): Promise<{ run: CodingRun; requeueAfterMs: number }> {
    const { namespace, name, uid } = run.metadata;
    const key = `${namespace}/${name}`;
    const storedPhase = run.status?.phase;
    const kibibytes = Math.ceil(storedJsonBytes(run) / 1024);
    const answeredPod = answered.pod?.pod.metadata;
    const teardown = unwritableRunTeardown({
      ...(sandbox.pod ? { observedPod: sandbox.pod } : {}),
      ...(answeredPod?.name ? { answeredPod: { name: answeredPod.name, ...(answeredPod.uid ? { uid: answeredPod.uid } : {}) } } : {}),
      ...(this.freshPodsSent.get(key) === uid ? { createSent: sandboxPodName(run) } : {}),
      ...(sandbox.networkPolicyExists ? { networkPolicy: networkPolicyName(run) } : {}),
      agentStarted,
    });
    // Kept before the teardown is sent, and not replaced by a teardown that deletes no pod (trimmed
    // and refused again): a delete whose answer was lost fails this reconcile, and its retry finds
    // the pod already deleting, counts nothing, and the ending said the pod was being deleted.
    const takenDown = sandboxTakenDown(storedPhase, teardown, kibibytes);
    if (takenDown) this.takenDown.set(uid, takenDown);
    for (const action of teardown) {
      this.beforeWrite();
      run = await this.applyAction(run, action);
    }
    this.claimsMade.delete(key);
    this.admittedLocally.delete(uid);
    this.grants.delete(uid);
    // Measured as the cache has it, as reconcileRun measures it when it looks again.
    const cached = this.deps.caches.runs.get(namespace, name);
    const stored = cached?.metadata.uid === uid ? cached : run;
    this.unwritable.set(uid, { generation: stored.metadata.generation, bytes: runBytes(stored) });
    const podsDeleted = teardown.flatMap((action) => (action.type === 'deletePod' ? [action.name] : []));
    const message = unwritableMessage(kibibytes, podsDeleted, endsOnceWritten(storedPhase));
    this.deps.logger.warn({ ...runLogFields(run), podsDeleted }, message);
    await this.deps.events.record(run, { type: 'Warning', reason: REASONS.InvalidSpec, message }).catch(() => undefined);
    return { run, requeueAfterMs: TOO_LARGE_RECHECK_MS };
  }

  /**
   * Adds a run deleted after its ttlSecondsAfterFinished to its namespace's record of finished
   * runs (#15.2); false when that record refuses it for good: the API server refused the write
   * (an immutable or quota-bound ConfigMap), or the ConfigMap at its name is not one the operator
   * keeps. The run is then kept, with a Warning Event, and tried again later: retried at every
   * backoff it was retried forever, and a run deleted unrecorded runs again when re-applied.
   */
  private async keepFinishedRecord(run: CodingRun, record: FinishedRunRecord): Promise<boolean> {
    try {
      await this.deps.kube.recordFinishedRun(run.metadata.namespace, run.metadata.name, record);
      return true;
    } catch (error) {
      const refused = error instanceof ForeignFinishedRunsError ? error.message : apiRefusal(error)?.message;
      if (refused === undefined) throw error;
      const message = `Not deleted after ttlSecondsAfterFinished: the record of finished runs could not take it (${refused.slice(0, 512)}); tried again in ${FINISHED_RECORD_RECHECK_MS / 60_000} minutes.`;
      this.deps.logger.warn(runLogFields(run), message);
      await this.deps.events.record(run, { type: 'Warning', reason: EVENT_REASONS.FinishedRunNotRecorded, message }).catch(() => undefined);
      return false;
    }
  }

  private async applyAction(run: CodingRun, action: Action, answered: { pod?: PodSeen } = {}): Promise<CodingRun> {
    const { kube, agent } = this.deps;
    const { namespace, name } = run.metadata;
    switch (action.type) {
      case 'addFinalizer': {
        // A refusal (an admission policy on the run's own metadata) is judged like a refused
        // pod: the run gets a phase that says why instead of no status at all.
        const added = await createOrRefuse('CodingRun', name, () =>
          kube.setRunFinalizers(run, [...(run.metadata.finalizers ?? []), FINALIZER]),
        );
        // The answer is the run as stored. The template it names, read for this decision, is in
        // its status only once the decision's write lands: a warm pool claim made before that
        // parses the run's spec from it (without, a templated run never got a pool pod).
        const template = run.status?.template;
        return template ? { ...added, status: { ...added.status, template } } : added;
      }
      case 'removeFinalizer':
        return kube.setRunFinalizers(
          run,
          (run.metadata.finalizers ?? []).filter((finalizer) => finalizer !== FINALIZER),
        );
      case 'ensureSandboxPolicy':
        await this.ensureSandboxPolicy(action.policy);
        return run;
      case 'createPod': {
        // Noted before it is sent: a create whose answer is lost may still have made the pod.
        // Not one the API server refused (4xx): that made nothing, and a pool pod may serve;
        // nor one that met someone else's pod at the name, which a deletion must never delete.
        const key = `${namespace}/${name}`;
        this.freshPodsSent.set(key, run.metadata.uid);
        const answer = await createOrRefuse('Pod', action.pod.metadata!.name!, () => kube.createPod(action.pod)).catch((error: unknown) => {
          if (error instanceof CreateRefusedError && error.refused.code < 500) this.freshPodsSent.delete(key);
          throw error;
        });
        if ('created' in answer) {
          answered.pod = { pod: answer.created, from: 'create', freshName: sandboxPodName(run) };
          return run;
        }
        const { holder } = answer;
        if (holder && !isOwnedByRun(holder, run)) {
          this.freshPodsSent.delete(key);
          throw new NameTakenError(takenName(run, 'Pod', holder)[0]!);
        }
        return run;
      }
      case 'deletePod':
        // By the uid decide() saw: a pod made again under the name since is another's (a 409), and stays.
        await goneUnlessSame(kube.deletePod(namespace, action.name, action.uid));
        // A create sent but not seen is settled by its delete: a pod it made is being deleted now.
        this.freshPodsSent.delete(`${namespace}/${name}`);
        this.deletions.note(
          `${namespace}/${name}`,
          'Pod',
          action.uid ? { metadata: { name: action.name, uid: action.uid } } : this.deps.caches.pods.get(namespace, action.name),
        );
        return run;
      case 'deleteNetworkPolicy': {
        // As the ConfigMaps below: the uid the cache shows for the run's policy is what is
        // deleted, so a policy made again under the name since (a 409) is another's and stays.
        // One the cache no longer shows as the run's is not the run's to delete.
        const cached = this.deps.caches.networkPolicies.get(namespace, action.name);
        if (!cached?.metadata?.uid || !isOwnedByRun(cached, run)) return run;
        await goneUnlessSame(kube.deleteNetworkPolicy(namespace, action.name, cached.metadata.uid));
        this.deletions.note(`${namespace}/${name}`, 'NetworkPolicy', cached);
        return run;
      }
      case 'deleteConfigMaps':
        for (const configMap of action.names) {
          // decide() names them; the cache holds the one seen as the run's, and its uid is
          // what is deleted: a ConfigMap made again under the name since (a 409) is another's
          // and stays. One the cache no longer shows as the run's is not the run's to delete.
          const cached = this.deps.caches.configMaps.get(namespace, configMap);
          if (!cached?.metadata?.uid || !isOwnedByRun(cached, run)) continue;
          await goneUnlessSame(kube.deleteConfigMap(namespace, configMap, cached.metadata.uid));
          this.deletions.note(`${namespace}/${name}`, 'ConfigMap', cached);
        }
        return run;
      case 'startAgent': {
        const parsed = parseSpec(run);
        if (parsed.ok) await agent.start({ ...run, spec: parsed.spec } as ParsedCodingRun, action.podName);
        return run;
      }
      case 'resumeAgent':
        await agent.resume(run, action.answer);
        return run;
      case 'stopAgent':
        await agent.stop(run);
        return run;
      case 'deleteRun':
        // Recorded first (apply() did): a run deleted unrecorded would run again when a GitOps tool re-applies it.
        // By its uid: a run deleted and created again under the name meanwhile is a new run, not this one's to delete.
        await goneUnlessSame(kube.deleteRun(namespace, name, run.metadata.uid));
        return run;
      case 'claimWarmPod':
        throw new WarmClaimSignal(
          this.deps.warmPools ? await this.claimWarmPod(run, action.pool, action.activeDeadlineSeconds) : { none: true },
          run,
        );
      case 'keepDiff': {
        const parsed = parseSpec(run);
        // A started run whose spec no longer parses (an upgrade tightened the schema) still
        // keeps its work: the last snapshot, whose read and final mark (keep-diff.ts
        // snapshotDiff, RunResources readDiff/writeDiff, the state's load) use only the run's
        // metadata and status, so the cast hands on a spec nothing on that way reads. Never
        // from the sandbox: its session checks the pod against the shape built from the parsed
        // spec (main.ts sandboxFor), which this run no longer has.
        const taken = parsed.ok
          ? () => agent.keepDiff({ ...run, spec: parsed.spec } as ParsedCodingRun, { fromSandbox: action.fromSandbox })
          : () => agent.keepDiff(run as unknown as ParsedCodingRun, { fromSandbox: false });
        const outcome = this.diffTakes.poll(`${namespace}/${name}`, run.metadata.uid, taken);
        if (!outcome) throw new DiffTakingSignal();
        if ('failed' in outcome) throw outcome.failed;
        throw new DiffKeptSignal(outcome.kept);
      }
    }
  }
}
