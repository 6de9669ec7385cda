// Keeps each warm pool at its size, in the background, on the leader: looks at the pool's
// unclaimed pods in the pod cache, asks planWarmPool what to do, does it. Runs after every
// claim (a pool refills at once) and on a timer (pods that ended, a cache that caught up).
// A pod this process just claimed still looks unclaimed in the cache until the watch brings
// the claim, so the claim is told here (claimed()) and the pod no longer counts: otherwise
// the pass right after a claim sees a full pool and the refill waits for the timer.
// Pods it created that the cache does not show yet count as starting (as a ReplicaSet's
// expectations), or a pass right after a create would create them again. With
// config.networkPolicy (the default) a pool's deny-all NetworkPolicy is in place before
// the pool gets a pod: no pool pod exists unselected by a policy. Each pass also tells the
// sessions opened ahead (sandbox/warm-sessions.ts) which pool pods are ready and unclaimed.
// A pool pod is one this loop made for that pool (its uid, from the create's answer), not any pod
// with the pool's labels: a namespace member who may create pods could otherwise plant one (their
// image, their volumes) for a run to claim and import its workspace into, and one who may label
// pods could move a pod of one pool into another (a runc pool's into a gVisor pool). Nor is a pod a claim ever
// touched (reconcile/warm-pool.ts claimMarks), whatever its labels say: a member who may label
// pods could otherwise give a claimed pod, its run's processes and workspace in it, the pool's
// label again for the next run to claim; nor one that is not, in what runs in it, the pod the
// pool builds (reconcile/warm-pool.ts poolPodChanges; a patched image). The uid of a pod it made stays known while the pod is in its pool or
// carries a claim from it: the reconciler takes as a run's claimed pod only such a pod
// (run-reconciler.ts claimedPod). A pod with the labels that this loop did not make, a
// new leader's predecessor's included, is deleted and replaced; so are the pods of a pool no
// longer configured; a pod a run controls is that run's and is left to it. Those deletes come
// after every pool was kept, a few per namespace and pass (reconcile/warm-pool-unwanted-deletes.ts),
// some at once: pods planted by the hundred in one namespace never hold up the refill of a pool.
// A pool in a watched namespace the controller has not listed (set aside: its lists refused,
// the operator's RoleBinding there deleted) is left alone until it lists: its pod cache is empty
// or partial there, so the pool looked empty at every pass, and the pods made, never seen, were
// forgotten after EXPECTATION_TTL_MS and made again: about 120 times the pool's size an hour.
// Once stopped (the lease lost, or shutdown) a pass in progress sends no more writes: each
// create and delete passes the loop's WriteGate first, since another replica may lead already
// and its loop keeps the same pools; settled() lets the controller wait for that pass to end.
import type { V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { OperatorConfig } from '../config/operator-config.ts';
import { isConflict, isNotFound } from '../kube/api-errors.ts';
import { controllingRunUid } from '../reconcile/ownership.ts';
import type { WarmPoolGateway } from '../kube/warm-pool-gateway.ts';
import { MAX_CREATES_PER_PASS, planWarmPool, type PoolPlan, type PoolPodView } from '../reconcile/warm-pool-plan.ts';
import { UNWANTED_DELETE_LIMITS, pickUnwantedDeletes } from '../reconcile/warm-pool-unwanted-deletes.ts';
import { admissionChangedMessage, admissionChanges } from '../reconcile/warm-pool-admission.ts';
import { FailureBackoff } from './failure-backoff.ts';
import {
  POOL_ISOLATION_LABEL,
  WARM_POOL_LABEL,
  claimMarks,
  claimOf,
  isWarmPoolNetworkPolicy,
  poolPodChanges,
  poolTemplateRun,
  warmPoolNetworkPolicy,
  warmPoolNetworkPolicyName,
  warmPoolPod,
  type WarmPoolConfig,
} from '../reconcile/warm-pool.ts';
import type { PoolPodRef } from '../sandbox/warm-sessions.ts';
import type { ObjectCache } from './run-reconciler.ts';
import { ReconcilerStoppedSignal, WriteGate } from './write-gate.ts';

/** A pass at least this often: replaces pods that ended and deletes the excess of a pool sized down. */
export const POOL_RESYNC_MS = 2_000;
/** A created pod the cache has not shown for this long is forgotten (its create may have raced a deletion). */
const EXPECTATION_TTL_MS = 30_000;
/** How many changes a log line names; a sidecar injector makes dozens. */
const CHANGES_NAMED = 8;
/** Deletes of unwanted pods in flight at once: a pass's share of them takes a few round trips, not one each. */
const UNWANTED_DELETES_AT_ONCE = 8;

export interface WarmPoolLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * An unclaimed pod of this pool by what it carries: in its namespace, still carrying the pool's
 * label, and the label its deny-all selects (a pool pod made before pools had one lacks it: never
 * claimed, replaced by the loop), nothing a claim leaves (claimMarks): a pod claimed once is never
 * the pool's again, whoever gave it the pool's label back; and, in what runs in it, the pod the
 * pool builds (poolPodChanges), whatever else changed its spec (a scheduling gate removed). Labels
 * are anyone's who may patch pods: WarmPoolLoop.madeIt says whether the loop made it for this pool.
 */
export function isPoolPod(pod: V1Pod, pool: WarmPoolConfig, config: OperatorConfig): boolean {
  return (
    isUnclaimedOfPool(pod, pool) &&
    pod.metadata?.labels?.[POOL_ISOLATION_LABEL] === pool.name &&
    claimMarks(pod).length === 0 &&
    poolPodChanges(pod, pool, config).length === 0
  );
}

const isUnclaimedOfPool = (pod: V1Pod, pool: WarmPoolConfig) =>
  pod.metadata?.namespace === pool.namespace && pod.metadata?.labels?.[WARM_POOL_LABEL] === pool.name;

export function poolPodView(pod: V1Pod): PoolPodView {
  return {
    name: pod.metadata!.name!,
    phase: pod.status?.phase ?? 'Pending',
    ready: pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false,
    deleting: pod.metadata?.deletionTimestamp !== undefined,
    createdAt: pod.metadata?.creationTimestamp ? new Date(pod.metadata.creationTimestamp).toISOString() : '',
  };
}

const poolKey = (pool: WarmPoolConfig) => `${pool.namespace}/${pool.name}`;

export class WarmPoolLoop {
  private readonly template = poolTemplateRun();
  /** Per pool: pods created and not yet in the cache, with when. */
  private readonly expected = new Map<string, Map<string, number>>();
  /**
   * Per pool: pods asked to be deleted that the cache may still show without a deletionTimestamp.
   * Per pool because each pool's pass forgets those its own pods no longer show: one set for all
   * had the first pool's pass forget the second pool's, which then counted such a pod as live.
   */
  private readonly deleting = new Map<string, Set<string>>();
  /** Per pool: pods this process claimed, with when, that the cache may still show in the pool. */
  private readonly claimedPods = new Map<string, Map<string, number>>();
  /**
   * The uids of the pool pods this loop made, with their pool (poolKey) and when: the only pods
   * it counts, claims or opens sessions into, each for its own pool alone (relabelled into
   * another pool, a pod is that pool's unwanted pod). Kept while the pod is claimed too: the
   * reconciler takes a run's claimed pod by it. No memory decides whether a pod was claimed:
   * the pod does (claimMarks), so a uid kept after its claim is never handed out again.
   */
  private readonly made = new Map<string, { pool: string; at: number }>();
  /** Pools whose deny-all this process created or found, with when: the cache may not show it yet. */
  private readonly policyConfirmed = new Map<string, number>();
  /**
   * Unwanted pods asked to be deleted, by uid and resourceVersion, with when: not asked again
   * while the cache shows them as they were (the watch has not brought the deletion yet), so
   * each pass takes pods not asked yet. A pod changed since, asked long ago, or whose delete
   * failed, is asked again.
   */
  private readonly unwantedAsked = new Map<string, number>();
  /**
   * Pods deleted as admission changed them (refuseAdmissionChanged), by uid and resourceVersion,
   * with when: the cache may show them only after that pass (and until the watch brings the
   * delete), and deleteUnwanted would ask again, logging them as pods this replica did not make.
   */
  private readonly deletedAtAdmission = new Map<string, number>();
  /** The namespace whose unwanted pod the last pass took last: the next pass starts after it. */
  private unwantedServedLast: string | undefined;
  /**
   * Unwanted pods the last pass left for later (over its limits) in namespaces not held by
   * unwantedDeleteFailures: the next pass runs at once.
   */
  private unwantedLeft = 0;
  /**
   * Per namespace: passes in a row in which a delete of an unwanted pod failed there (a 403 once
   * the operator's RoleBinding there is gone, a 429, a 5xx), and until when no pass asks a delete
   * there: 2 s after the first, doubling, at most 5 min (FailureBackoff). A failed pod is picked
   * again at the next pass, and every pass asks a share: held only while passes ran at once
   * after one another, such a namespace was asked again at every other pass, and run-controller.ts
   * pokes at every event of any pool-labelled pod, which anyone who may create or patch pods
   * sends: 10 failing DELETEs per event. Held by time, every pass (at once, poked, the resync,
   * followUp) leaves it alone until its wait ends, and one namespace held never waits on
   * another's passes. Cleared by a delete there that did not fail, or once it shows no unwanted pod.
   */
  private readonly unwantedDeleteFailures = new FailureBackoff();
  /** The namespaces unwantedDeleteFailures counts: cleared once they show no unwanted pod. */
  private readonly unwantedDeleteFailedIn = new Set<string>();
  /**
   * The namespaces of the pods with a pool's label that no pool wants, as the last pass's
   * deleteUnwanted saw them: those asked to be deleted and still shown, those whose delete failed
   * or waits, and those in a namespace that has not listed. followUp passes again while there are any.
   */
  private unwantedShownIn = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  /** The pass followUp asked for, and when (the clock's time) it is due. */
  private followUpTimer: NodeJS.Timeout | undefined;
  private followUpDue = 0;
  /**
   * Per namespace: follow-ups in a row while it shows unwanted pods, and when its next one is
   * due (kept until that pass ran). Per namespace: with one count for all, one tenant's pods that
   * can never be deleted had every other namespace's failed delete wait up to 5 minutes too.
   */
  private readonly followUps = new FailureBackoff();
  private readonly followUpDueIn = new Map<string, number>();
  private running: Promise<void> | undefined;
  private again = false;
  /** Closed by stop(): a pass in progress writes nothing after it. */
  private readonly gate = new WriteGate();
  /** Pools left alone because their namespace has not listed: logged once, and again once it has. */
  private readonly unlistedPools = new Set<string>();

  constructor(
    private readonly deps: {
      config: OperatorConfig;
      gateway: WarmPoolGateway;
      pods: ObjectCache<V1Pod>;
      /** The operator's NetworkPolicies (MANAGED_SELECTOR): where a pool's deny-all shows once made. */
      networkPolicies: ObjectCache<V1NetworkPolicy>;
      /** Whether the caches hold a namespace's objects (run-controller.ts: it has listed); absent, every namespace's. */
      listed?: (namespace: string) => boolean;
      logger: WarmPoolLogger;
      /** Tool sessions opened ahead into the ready pool pods (sandbox/warm-sessions.ts); absent, none are. */
      sessions?: { keep(pods: readonly PoolPodRef[]): void; closeAll(): void };
      now?: () => number;
    },
  ) {}

  private stopped = false;
  /** Per pool: failed starts in a row and until when the pool makes no pod (createsAllowed). */
  private readonly startFailures = new FailureBackoff();
  /** Per pool: pods admission changed in a row and until when the pool makes no pod (refuseAdmissionChanged). */
  private readonly admissionFailures = new FailureBackoff();
  /**
   * Per pool: pods this loop made that stopped being the pool's while unclaimed (countChangedAfterMade),
   * in a row, until when the pool makes no pod, and when the last one was seen so (lastFailedAt).
   */
  private readonly changedFailures = new FailureBackoff();
  /** The uids of the pods countChangedAfterMade took, with when: deleteUnwanted names them as such, not as pods it did not make. */
  private readonly changedAfterMade = new Map<string, number>();

  start(): void {
    // A stopped loop stays stopped: its timer would never be cleared.
    if (this.stopped) return;
    // A pass now, pools or not: the pod watch's pokes for the pods of a pool taken out of the
    // config came while their namespace had not listed (the informer's first list), and those
    // passes left them alone. Without pools no timer: passes come from pod events, and from
    // followUp while such pods remain.
    this.poke();
    if (this.deps.config.warmPools.length === 0) return;
    this.timer = setInterval(() => this.poke(), POOL_RESYNC_MS);
    this.timer.unref();
  }

  /** No pass starts after this, and the one in progress makes no more writes; settled() waits for it. */
  stop(): void {
    this.stopped = true;
    this.gate.close();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.followUpTimer) clearTimeout(this.followUpTimer);
    this.followUpTimer = undefined;
    this.deps.sessions?.closeAll();
  }

  /** Whether this loop made the pod for `pool` (a pool pod it may hand to a run, or one a run claimed from it). */
  madeIt(pod: V1Pod, pool: WarmPoolConfig): boolean {
    const uid = pod.metadata?.uid;
    return uid !== undefined && this.made.get(uid)?.pool === poolKey(pool);
  }

  /** A pod of the pool was claimed: it left the pool whatever the cache says yet, and the pool refills now. */
  claimed(pool: WarmPoolConfig, podName: string): void {
    const claimed = this.claimedPods.get(poolKey(pool)) ?? new Map<string, number>();
    this.claimedPods.set(poolKey(pool), claimed.set(podName, this.deps.now?.() ?? Date.now()));
    this.poke();
  }

  /** Ask for a pass soon; passes never overlap, and one asked for during a pass runs after it. */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .catch((error: unknown) =>
        this.deps.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'warm pool pass failed'),
      )
      .finally(() => {
        this.running = undefined;
        // A poke during the pass may be the pod event nothing repeats (an idle pod changes no more).
        if (this.again || this.unwantedLeft > 0) {
          this.again = false;
          this.poke();
        } else this.followUp();
      });
  }

  /**
   * Without the resync timer (no pools), a pass later while pods with a pool's label that no
   * pool wants are still shown: a delete that failed (a 5xx, a 429, a 403), one asked whose
   * deletion the watch has not brought, a namespace that has not listed. An idle pod brings no
   * event that would poke. Per namespace, 2 s after the first, doubling, at most 5 min
   * (FailureBackoff), until it shows none; the pass comes when the first namespace is due.
   */
  private followUp(): void {
    if (this.stopped || this.timer) return;
    const now = this.deps.now?.() ?? Date.now();
    for (const namespace of this.followUpDueIn.keys())
      if (!this.unwantedShownIn.has(namespace)) {
        this.followUps.clear(namespace);
        this.followUpDueIn.delete(namespace);
      }
    // A namespace whose follow-up is still to come keeps it: a pass a pod event asked for meanwhile is not one more in a row.
    for (const namespace of this.unwantedShownIn)
      if (!this.followUpDueIn.has(namespace)) this.followUpDueIn.set(namespace, now + this.followUps.fail(namespace, now));
    if (this.followUpDueIn.size === 0) return;
    const due = Math.min(...this.followUpDueIn.values());
    if (this.followUpTimer) {
      if (this.followUpDue <= due) return;
      clearTimeout(this.followUpTimer);
    }
    this.followUpDue = due;
    this.followUpTimer = setTimeout(
      () => {
        this.followUpTimer = undefined;
        // The namespaces this pass is for: their next follow-up, if they still need one, waits longer.
        for (const [namespace, at] of this.followUpDueIn) if (at <= due) this.followUpDueIn.delete(namespace);
        this.poke();
      },
      Math.max(0, due - now),
    );
    this.followUpTimer.unref();
  }

  /** Resolves once no pass is running: after stop(), once the one in progress has ended (its write on the way included). */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  /**
   * One pass over every pool; resolves when its creates and deletes are done. A pool whose
   * creates or deletes fail (a full ResourceQuota) is logged and the pass goes on: neither the
   * pools after it nor the sessions opened ahead wait for that namespace. The pods no pool
   * wants are deleted last, a bounded share per pass (deleteUnwanted).
   */
  async pass(): Promise<void> {
    // Set again by this pass's deleteUnwanted: a pass that failed before it asks for no other at once.
    this.unwantedLeft = 0;
    // Stopped mid-pass, the pass just ends: what it sent stays sent, the rest is the next leader's.
    await this.gate.unlessStopped(
      () => this.keepAll(),
      () => undefined,
    );
  }

  private async keepAll(): Promise<void> {
    const ready: PoolPodRef[] = [];
    for (const pool of this.deps.config.warmPools) {
      if (!this.namespaceListed(pool)) continue;
      try {
        await this.keep(pool);
      } catch (error) {
        if (error instanceof ReconcilerStoppedSignal) throw error;
        this.deps.logger.warn(
          { pool: poolKey(pool), err: error instanceof Error ? error.message : String(error) },
          'warm pool pass failed',
        );
      }
      ready.push(...this.readyPods(pool));
    }
    this.forgetMade();
    if (!this.stopped) this.deps.sessions?.keep(ready);
    await this.deleteUnwanted();
  }

  /** Whether the pool's namespace has listed; a change is logged once. */
  private namespaceListed(pool: WarmPoolConfig): boolean {
    const key = poolKey(pool);
    if (this.deps.listed?.(pool.namespace) ?? true) {
      if (this.unlistedPools.delete(key))
        this.deps.logger.info({ pool: key }, "the warm pool's namespace has listed: keeping the pool again");
      return true;
    }
    if (!this.unlistedPools.has(key)) {
      this.unlistedPools.add(key);
      this.deps.logger.warn(
        { pool: key },
        "the warm pool's namespace cannot be listed (the operator's RoleBinding there deleted?): the pool gets no pod until it is",
      );
    }
    return false;
  }

  /**
   * Deletes the pods with a pool's label that no pool wants, after every pool was kept:
   * - in a pool's namespace with its label, the ones this loop did not make: made before pools
   *   had a deny-all (not selected by it), by this loop's predecessor (a new leader cannot tell
   *   them from planted ones), or planted. Never claimed; the pool makes its own instead.
   * - the unclaimed pods of pools the config no longer has (removed, renamed, moved to another
   *   namespace; `warmPools: []` too). No pass keeps them and nothing else deletes them (a pool
   *   pod has no owner), so they held their nodes and their namespace's quota for good. In a
   *   namespace with no pool the operator cannot tell them from planted ones either, and a
   *   pod that carries the operator's labels is the operator's to delete.
   * The pod cache holds only the operator's pods; a claimed pod has lost the pool's label.
   * A pod a run controls is left alone, pool label or not: it is that run's sandbox (a claimed
   * pod someone gave the pool's label back), and deleting it would let anyone who may label
   * pods end another's run through the operator. No run can claim it (claimMarks); it goes
   * with its run, or with the garbage collector once the run is gone.
   * At most a few per namespace and pass, some at once, as the cache showed them (a pod
   * claimed since is left alone); the rest in the passes right after (unwantedLeft), each
   * starting with the namespace after the last one served (unwantedServedLast). None in a
   * namespace whose deletes failed until its backoff ends (unwantedDeleteFailures), nor in a
   * namespace that has not listed: its pods there are not all in the cache.
   */
  private async deleteUnwanted(): Promise<void> {
    const now = this.deps.now?.() ?? Date.now();
    const pools = this.deps.config.warmPools;
    const listed = this.deps.listed ?? (() => true);
    const anyNamespace = this.deps.pods
      .list()
      .filter((pod) => pod.metadata?.labels?.[WARM_POOL_LABEL] !== undefined && !pod.metadata.deletionTimestamp);
    const labelled = anyNamespace.filter((pod) => listed(pod.metadata!.namespace!));
    const askedIn = new Set<string>();
    const shown = new Set(labelled.map(askedKey));
    for (const [key, at] of this.unwantedAsked) if (!shown.has(key) || now - at > EXPECTATION_TTL_MS) this.unwantedAsked.delete(key);
    for (const [key, at] of this.deletedAtAdmission) if (now - at > EXPECTATION_TTL_MS) this.deletedAtAdmission.delete(key);
    const shownUids = new Set(labelled.map((pod) => pod.metadata?.uid));
    for (const [uid, at] of this.changedAfterMade)
      if (!shownUids.has(uid) && now - at > EXPECTATION_TTL_MS) this.changedAfterMade.delete(uid);
    const unwanted = labelled.flatMap((pod) => {
      const pool = pools.find((each) => isUnclaimedOfPool(pod, each));
      // The cheap looks first: judging a pod (poolPodChanges) costs milliseconds for a large
      // one, and pods planted by the hundred were judged at every pass.
      if (this.unwantedAsked.has(askedKey(pod)) || this.deletedAtAdmission.has(askedKey(pod))) {
        askedIn.add(pod.metadata!.namespace!);
        return [];
      }
      if (controllingRunUid(pod) !== undefined || (pool && this.madeIt(pod, pool) && isPoolPod(pod, pool, this.deps.config))) return [];
      const changed = pool !== undefined && this.changedAfterMade.has(pod.metadata?.uid ?? '');
      return [{ pod, namespace: pod.metadata!.namespace!, pool, changed, failed: undefined as string | undefined }];
    });
    const unwantedIn = new Set(unwanted.map((each) => each.namespace));
    for (const namespace of this.unwantedDeleteFailedIn) if (!unwantedIn.has(namespace)) this.clearUnwantedDeleteFailures(namespace);
    const eligible = unwanted.filter((each) => !this.unwantedDeleteFailures.holds(each.namespace, now));
    const { now: picked, later, lastNamespace } = pickUnwantedDeletes(eligible, UNWANTED_DELETE_LIMITS, this.unwantedServedLast);
    this.unwantedServedLast = lastNamespace;
    this.unwantedShownIn = new Set([
      ...anyNamespace.filter((pod) => !listed(pod.metadata!.namespace!)).map((pod) => pod.metadata!.namespace!),
      ...askedIn,
      ...unwantedIn,
    ]);
    const failedIn = new Set<string>();
    await eachAtMost(picked, UNWANTED_DELETES_AT_ONCE, async (each) => {
      this.gate.check();
      const key = askedKey(each.pod);
      this.unwantedAsked.set(key, now);
      try {
        await this.deps.gateway.deletePod(each.namespace, each.pod.metadata!.name!, seenAs(each.pod));
      } catch (error) {
        each.failed = error instanceof Error ? error.message : String(error);
        // Not asked after all (a timeout, a 5xx, a 429): the first pass once its namespace's
        // backoff ends asks again, not one EXPECTATION_TTL_MS later. Gone (404) or changed since
        // (409), the cache will show it.
        if (!isNotFound(error) && !isConflict(error)) {
          this.unwantedAsked.delete(key);
          failedIn.add(each.namespace);
        }
      }
    });
    // One failure per namespace and pass, counted from when the answers came: a share of 10 refused
    // at once is one refusal of the namespace, not 10 doublings of its wait.
    const answeredAt = this.deps.now?.() ?? Date.now();
    for (const namespace of new Set(picked.map((each) => each.namespace)))
      if (failedIn.has(namespace)) {
        this.unwantedDeleteFailures.fail(namespace, answeredAt);
        this.unwantedDeleteFailedIn.add(namespace);
      } else this.clearUnwantedDeleteFailures(namespace);
    // The pods over this pass's share go in a pass at once, but for those of a namespace whose deletes failed in it.
    this.unwantedLeft = later.filter((each) => !failedIn.has(each.namespace)).length;
    // One line per pool or namespace and pass, not one per pod: planted pods by the hundred
    // would otherwise flood the log as they flood the cache.
    const group = (each: (typeof unwanted)[number]) => (each.pool ? poolKey(each.pool) : each.namespace);
    for (const key of new Set(picked.map(group))) {
      const ours = picked.filter((each) => group(each) === key);
      // Pods it made that changed were logged with their changes (countChangedAfterMade): not "did not make".
      const changed = ours.filter((each) => each.changed);
      const changedFailed = changed.filter((each) => each.failed !== undefined);
      if (changed.length > changedFailed.length)
        this.deps.logger.info(
          { pool: key, deleted: changed.length - changedFailed.length },
          "replaced warm pool pods this replica made that stopped being the pool's pod",
        );
      if (changedFailed.length > 0)
        this.deps.logger.warn(
          { pool: key, failed: changedFailed.length, err: changedFailed[0]!.failed },
          "could not delete warm pool pods this replica made that stopped being the pool's pod",
        );
      const mine = ours.filter((each) => !each.changed);
      if (mine.length === 0) continue;
      const pool = mine[0]!.pool;
      const where = pool
        ? { pool: key }
        : { namespace: key, pools: [...new Set(mine.map((each) => each.pod.metadata!.labels![WARM_POOL_LABEL]))] };
      const failed = mine.filter((each) => each.failed !== undefined);
      const left = later.filter((each) => group(each) === key).length;
      if (failed.length < mine.length)
        this.deps.logger.info(
          { ...where, deleted: mine.length - failed.length, left },
          pool ? 'replaced pods with the pool label that this replica did not make' : 'deleted pods of a pool no longer configured',
        );
      if (failed.length > 0)
        this.deps.logger.warn(
          { ...where, failed: failed.length, err: failed[0]!.failed },
          pool
            ? 'could not delete pods with the pool label that this replica did not make'
            : 'could not delete pods of a pool no longer configured',
        );
    }
  }

  private clearUnwantedDeleteFailures(namespace: string): void {
    this.unwantedDeleteFailures.clear(namespace);
    this.unwantedDeleteFailedIn.delete(namespace);
  }

  /**
   * A made pod is kept while the cache shows it in its pool, or claimed from it (by this replica
   * or, its answer lost, unbeknown to it: the claim's marks show): the reconciler asks about a
   * claimed pod for as long as its run may not name it yet. It is forgotten as soon as the cache
   * shows it as neither (relabelled into another pool, stripped of its claim, no longer the pod the pool builds,
   * its pool taken out of the config), and once the cache no longer shows it and its create is
   * long past (gone, or never shown).
   */
  private forgetMade(): void {
    const now = this.deps.now?.() ?? Date.now();
    const pools = this.deps.config.warmPools;
    const kept = new Set<string | undefined>();
    for (const pod of this.deps.pods.list()) {
      const uid = pod.metadata?.uid;
      const made = uid === undefined ? undefined : this.made.get(uid);
      if (made === undefined) continue;
      const pool = pools.find((each) => poolKey(each) === made.pool);
      if (pool && (isPoolPod(pod, pool, this.deps.config) || claimOf(pod, [pool]) !== undefined)) kept.add(uid);
      else this.made.delete(uid!);
    }
    for (const [uid, made] of this.made) if (now - made.at > EXPECTATION_TTL_MS && !kept.has(uid)) this.made.delete(uid);
  }

  /**
   * A pod this loop made that stopped being the pool's pod while unclaimed: its image or a
   * container patched, or, after it started, its init container read as run from an image of
   * another repository (containerd names an image by the first of its references on the node in
   * lexical order: a copy of the same image another tenant pulled as docker.io/a/copy makes every
   * custom-image pool pod on that node read so; init-container-runs.ts matches by digest only
   * where the operator knows the image's). deleteUnwanted deletes it, and the pool would make
   * another at once, which could land on the same node: made and deleted at every pass. So the
   * pool waits before it makes another, 2 s doubling up to 5 min (FailureBackoff), until a
   * pod it made after this one is ready and still its own; its ready pods from before do not end
   * the wait (as admissionFailures).
   */
  private countChangedAfterMade(pool: WarmPoolConfig, now: number): void {
    const key = poolKey(pool);
    for (const pod of this.deps.pods.list()) {
      const uid = pod.metadata?.uid;
      const made = uid === undefined ? undefined : this.made.get(uid);
      if (made?.pool !== key || this.changedAfterMade.has(uid!)) continue;
      if (isPoolPod(pod, pool, this.deps.config)) {
        // A pod made after the last one that changed, ready and still the pool's: the cause is gone.
        const changedAt = this.changedFailures.lastFailedAt(key);
        if (changedAt !== undefined && made.at > changedAt && poolPodView(pod).ready) this.changedFailures.clear(key);
      } else if (isUnclaimedOfPool(pod, pool) && claimMarks(pod).length === 0 && !pod.metadata?.deletionTimestamp)
        this.changedSinceMade(pool, pod, now);
    }
  }

  private changedSinceMade(pool: WarmPoolConfig, pod: V1Pod, now: number): void {
    const key = poolKey(pool);
    const retryInMs = this.changedFailures.fail(key, now);
    this.changedAfterMade.set(pod.metadata!.uid!, now);
    const changes = admissionChanges(pod, pool, this.deps.config);
    const ranElsewhere = changes.some((change) => change.includes('the kubelet ran it from this image'));
    this.deps.logger.warn(
      {
        pool: key,
        pod: pod.metadata?.name,
        node: pod.spec?.nodeName,
        changes: changes.slice(0, CHANGES_NAMED),
        ...(changes.length > CHANGES_NAMED ? { more: changes.length - CHANGES_NAMED } : {}),
        retryInMs,
      },
      "a warm pool pod this replica made stopped being the pool's pod before any run claimed it: it is never handed to a run, " +
        'so it is replaced, and the pool waits before it makes another' +
        (ranElsewhere
          ? "; the node names the image its init container ran by another repository (a copy of the same image pulled there under another name?): pin sandboxImage to a digest, which is then matched against the kubelet's imageID"
          : ''),
    );
  }

  /** The pool's ready pods in the cache that are neither claimed nor being deleted. */
  private readyPods(pool: WarmPoolConfig): PoolPodRef[] {
    const claimed = this.claimedPods.get(poolKey(pool));
    const deleting = this.deleting.get(poolKey(pool));
    return this.deps.pods
      .list()
      .filter((pod) => this.madeIt(pod, pool) && isPoolPod(pod, pool, this.deps.config) && !claimed?.has(pod.metadata!.name!))
      .filter((pod) => poolPodView(pod).ready && !pod.metadata?.deletionTimestamp && !deleting?.has(pod.metadata!.name!))
      .map((pod) => ({ namespace: pool.namespace, name: pod.metadata!.name!, uid: pod.metadata!.uid! }));
  }

  /**
   * Whether the pool's deny-all NetworkPolicy is in place, creating it when it is not. A name
   * held by a policy the operator did not make this way (another's rules under our name)
   * holds the pool empty: pods no policy of ours isolates are never made.
   */
  private async policyInPlace(pool: WarmPoolConfig, now: number): Promise<boolean> {
    if (!this.deps.config.networkPolicy) return true;
    const cached = this.deps.networkPolicies.get(pool.namespace, warmPoolNetworkPolicyName(pool));
    if (isWarmPoolNetworkPolicy(cached, pool)) {
      this.policyConfirmed.delete(poolKey(pool));
      return true;
    }
    const confirmedAt = this.policyConfirmed.get(poolKey(pool));
    if (!cached && confirmedAt !== undefined && now - confirmedAt < EXPECTATION_TTL_MS) return true;
    this.gate.check();
    const holder = await this.deps.gateway.createPoolNetworkPolicy(warmPoolNetworkPolicy(pool));
    if (!isWarmPoolNetworkPolicy(holder, pool)) {
      this.deps.logger.warn(
        { pool: poolKey(pool), networkPolicy: warmPoolNetworkPolicyName(pool) },
        "a NetworkPolicy that is not the pool's deny-all holds its name: the pool stays empty until it is deleted",
      );
      return false;
    }
    this.policyConfirmed.set(poolKey(pool), now);
    return true;
  }

  private async keep(pool: WarmPoolConfig): Promise<void> {
    const now = this.deps.now?.() ?? Date.now();
    // Pods with the pool's label that this loop did not make are not counted here: deleteUnwanted deletes them.
    if (!(await this.policyInPlace(pool, now))) return;
    const inPool = this.deps.pods.list().filter((pod) => this.madeIt(pod, pool) && isPoolPod(pod, pool, this.deps.config));
    const seen = new Set(inPool.map((pod) => pod.metadata!.name!));
    // A claim the cache shows (the pod left the pool) or that is long past is forgotten.
    const claimed = this.claimedPods.get(poolKey(pool)) ?? new Map<string, number>();
    for (const [name, at] of claimed) if (!seen.has(name) || now - at > EXPECTATION_TTL_MS) claimed.delete(name);
    const cached = inPool.filter((pod) => !claimed.has(pod.metadata!.name!));
    const expected = this.expected.get(poolKey(pool)) ?? new Map<string, number>();
    this.expected.set(poolKey(pool), expected);
    // Shown by the cache at all, a created pod is counted from there (in the pool) or is no longer
    // the pool's (claimed before any pass saw it in the pool: kept expected, it held a place
    // until the expectation expired and the pool stayed one short for 30 s).
    for (const [name, at] of expected) if (this.deps.pods.get(pool.namespace, name) || now - at > EXPECTATION_TTL_MS) expected.delete(name);
    const deleting = this.deleting.get(poolKey(pool)) ?? new Set<string>();
    this.deleting.set(poolKey(pool), deleting);
    const views = [
      ...cached.map(poolPodView).map((view) => (deleting.has(view.name) ? { ...view, deleting: true } : view)),
      ...[...expected.keys()].map((name) => ({
        name,
        phase: 'Pending',
        ready: false,
        deleting: false,
        createdAt: new Date(now).toISOString(),
      })),
    ];
    // Gone from the cache, or out of the pool (claimed): forgotten. Only this pool's: `seen` holds no other's pods.
    for (const name of deleting) if (!seen.has(name)) deleting.delete(name);
    const plan = planWarmPool(pool.size, views, MAX_CREATES_PER_PASS, {
      now,
      readyTimeoutMs: this.deps.config.sandboxReadyTimeoutSeconds * 1000,
    });
    // Before createsAllowed: a pod that changed since this pass's last look holds this pass's creates too.
    this.countChangedAfterMade(pool, now);
    const create = this.createsAllowed(pool, views, plan, now) ? plan.create : 0;
    for (let index = 0; index < create; index++) {
      this.gate.check();
      const created = await this.deps.gateway.createPoolPod(warmPoolPod(pool, this.deps.config, this.template));
      // Judged on the create's answer, the pod as admitted: the cache would show it only later,
      // as a pod this loop did not make.
      const changes = admissionChanges(created, pool, this.deps.config);
      if (changes.length > 0) {
        await this.refuseAdmissionChanged(pool, created, changes, now);
        break;
      }
      this.admissionFailures.clear(poolKey(pool));
      expected.set(created.metadata!.name!, now);
      if (created.metadata?.uid) this.made.set(created.metadata.uid, { pool: poolKey(pool), at: now });
    }
    for (const name of plan.delete) {
      this.gate.check();
      deleting.add(name);
      expected.delete(name);
      const pod = cached.find((each) => each.metadata!.name === name);
      await this.deps.gateway.deletePod(pool.namespace, name, pod ? seenAs(pod) : undefined);
    }
    if (create > 0 || plan.delete.length > 0)
      this.deps.logger.info({ pool: poolKey(pool), created: create, deleted: plan.delete.length }, 'warm pool resized');
  }

  /**
   * A pod admission changed from what the pool made (a mutating webhook: IRSA's token volume and
   * AWS_* variables, a sidecar, a deadline) is never handed to a run, so it is never counted,
   * claimed or given a session: it is deleted now, as the create answered it (its uid and
   * resourceVersion), and the pool waits before it makes another, 2 s doubling up to 5 min
   * (FailureBackoff), until a pod it makes is admitted as made. Made again at every pass it
   * was made and deleted every few seconds for as long as the webhook was there. The wait is the
   * pool's own count, not startFailures: pods made before the webhook came, ready, would reset
   * that at every pass. A delete that fails is left to deleteUnwanted (a pod this loop did not
   * make, as far as it keeps).
   */
  private async refuseAdmissionChanged(pool: WarmPoolConfig, created: V1Pod, changes: readonly string[], now: number): Promise<void> {
    const key = poolKey(pool);
    const retryInMs = this.admissionFailures.fail(key, now);
    const pod = created.metadata?.name;
    this.deps.logger.warn({ pool: key, pod, changes, retryInMs }, admissionChangedMessage(pool, changes));
    if (pod === undefined) return;
    this.gate.check();
    try {
      await this.deps.gateway.deletePod(pool.namespace, pod, seenAs(created));
      this.deletedAtAdmission.set(askedKey(created), now);
    } catch (error) {
      this.deps.logger.warn(
        { pool: key, pod, err: error instanceof Error ? error.message : String(error) },
        'could not delete a warm pool pod admission changed: the next passes delete it',
      );
    }
  }

  /**
   * Whether the pool may create pods now. Pods that end or stick before they are ready (an
   * image whose container exits, one that cannot be pulled) would be replaced at every pass,
   * and every change to a pool pod asks for a pass: a pod made and failed every few seconds
   * for as long as the image is wrong. After each such round the pool waits, 2 s doubling up
   * to 5 min (FailureBackoff), until a pod of it is ready again.
   */
  private createsAllowed(pool: WarmPoolConfig, views: readonly PoolPodView[], plan: PoolPlan, now: number): boolean {
    const key = poolKey(pool);
    if (views.some((view) => view.ready && !view.deleting)) this.startFailures.clear(key);
    if (plan.failedStarts > 0) {
      const retryInMs = this.startFailures.fail(key, now);
      this.deps.logger.warn(
        { pool: key, failedStarts: plan.failedStarts, retryInMs },
        'warm pool pods ended or stuck before they were ready; the pool waits before it makes more',
      );
    }
    return !this.startFailures.holds(key, now) && !this.admissionFailures.holds(key, now) && !this.changedFailures.holds(key, now);
  }
}

/** A pod as the cache shows it, for a delete that must not reach a pod changed since (a claim). */
function seenAs(pod: V1Pod): { uid?: string; resourceVersion?: string } {
  return {
    ...(pod.metadata?.uid ? { uid: pod.metadata.uid } : {}),
    ...(pod.metadata?.resourceVersion ? { resourceVersion: pod.metadata.resourceVersion } : {}),
  };
}

/** An unwanted pod as asked to be deleted: the same pod, unchanged since. */
const askedKey = (pod: V1Pod) =>
  `${pod.metadata?.uid ?? `${pod.metadata?.namespace}/${pod.metadata?.name}`}@${pod.metadata?.resourceVersion ?? ''}`;

/**
 * Runs `each` over `items`, at most `limit` at once. `each` catches the errors of its item; one
 * it throws (the write gate closed) stops every worker before its next item, and is thrown once
 * all have ended, so no call is still on its way when this settles.
 */
async function eachAtMost<T>(items: readonly T[], limit: number, each: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let stop = false;
  const worker = async () => {
    while (!stop && next < items.length) {
      try {
        await each(items[next++]!);
      } catch (error) {
        stop = true;
        throw error;
      }
    }
  };
  const ended = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker));
  const failed = ended.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
}
