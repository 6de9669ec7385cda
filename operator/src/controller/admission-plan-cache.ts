// The admission plan (reconcile/admission.ts planQueue) kept between reconciles. Every queued
// run is looked at again every 30 s (QUEUED_RECHECK_MS), and each look made the whole cluster's
// plan again: every cached run counted, every waiting run sorted, every round played, and the
// policy and Redis token tally of every namespace with waiting runs read. 5000 queued runs cost
// 13 ms a plan, 65 s of CPU every 30 s on the leader's one event loop. Here a plan is made again
// only once one of its inputs moved:
// - a run's admission facts (admissionFactsChanged): the run watch reports every change, and
//   a queued run's new place or a step's progress are not among them;
// - a sandbox pod (a finished run holds its slot until its pod goes): the pod watch reports;
// - this process's own admissions, grants and unwritable runs (counted collections below);
// - a watched namespace set aside at the term's start that has listed since (namespaceListed):
//   its runs were out of the plans until then (run-reconciler.ts, admission.ts inPlanScope);
// - the namespaces' policies and whether each has spent its token budget, read again at most
//   every FAIR_SHARE_TTL_MS (at each look of a run whose namespace has a budget). How much was
//   spent is not an input: a namespace's running runs add to it at each model call, and a plan
//   made again at each such change cost 5000 plans every 30 s with 5000 runs queued behind
//   a busy one.
// The decisions are the plans' own: the cache only says when one made before still holds.
import type { CodingRun } from '../api/index.ts';
import {
  admissionFactsChanged,
  admissionFrom,
  computeAdmission,
  isOutOfBudget,
  planQueue,
  type AdmissionContext,
  type AdmissionPlan,
  type QueuePlan,
  type TokenBudgetView,
} from '../reconcile/admission.ts';
import type { NamespacePolicy } from '../reconcile/namespace-policy.ts';
import { isDeepStrictEqual } from 'node:util';

/**
 * How long the namespaces' policies and token tallies are reused, for runs of namespaces without
 * a token budget (a run of a namespace with one reads the tallies at each look: fairShareOf);
 * the policy reader keeps an annotation NAMESPACE_POLICY_TTL_MS more
 * (kube/namespace-policy-reader.ts).
 */
export const FAIR_SHARE_TTL_MS = 2_000;

/**
 * What each namespace with waiting runs set (its annotations) and spent today. A budget's
 * usedToday may be an earlier read's: a read that finds only more spent, on the same side of
 * the budget, keeps the view a plan was made from (sameForPlans).
 */
export interface FairShareView {
  policies: ReadonlyMap<string, NamespacePolicy>;
  budgets: ReadonlyMap<string, TokenBudgetView>;
  /**
   * Namespaces with waiting runs whose policy could not be read (a 403: the operator's
   * RoleBinding there deleted while it leads): their waiting runs are left out of the plans
   * (admission.ts inPlanScope) instead of every run's admission failing with the read.
   */
  unreadable: ReadonlySet<string>;
}

/** Whether two views make the same plans: the same policies and unreadable namespaces, and each budget the same and spent or not alike. */
function sameForPlans(a: FairShareView, b: FairShareView): boolean {
  if (a.budgets.size !== b.budgets.size || !isDeepStrictEqual(a.policies, b.policies)) return false;
  if (a.unreadable.size !== b.unreadable.size || [...a.unreadable].some((namespace) => !b.unreadable.has(namespace))) return false;
  for (const [namespace, budget] of a.budgets) {
    const other = b.budgets.get(namespace);
    if (
      other === undefined ||
      other.tokensPerDay !== budget.tokensPerDay ||
      other.day !== budget.day ||
      isOutOfBudget(other) !== isOutOfBudget(budget)
    )
      return false;
  }
  return true;
}

/** The runs and the context a plan is made from: read from the caches only when one is made. */
export interface PlanSource {
  runs: readonly CodingRun[];
  context: AdmissionContext;
}

/** A Set that counts its changes: a plan made before a change is stale. */
export class CountedSet<T> extends Set<T> {
  changes = 0;
  override add(value: T): this {
    if (!this.has(value)) this.changes++;
    return super.add(value);
  }
  override delete(value: T): boolean {
    const deleted = super.delete(value);
    if (deleted) this.changes++;
    return deleted;
  }
  override clear(): void {
    if (this.size > 0) this.changes++;
    super.clear();
  }
}

/** A Map that counts its changes (each set counts: its value may differ). */
export class CountedMap<K, V> extends Map<K, V> {
  changes = 0;
  override set(key: K, value: V): this {
    this.changes++;
    return super.set(key, value);
  }
  override delete(key: K): boolean {
    const deleted = super.delete(key);
    if (deleted) this.changes++;
    return deleted;
  }
  override clear(): void {
    if (this.size > 0) this.changes++;
    super.clear();
  }
}

interface KeptPlan extends PlanSource {
  plan: QueuePlan;
  changes: number;
  localChanges: number;
  view: FairShareView;
}

export class AdmissionPlanCache {
  /** Changes to the runs' admission facts and to sandbox pods, as the watches reported them. */
  private changes = 0;
  private namespaces: { changes: number; waiting: ReadonlySet<string> } | undefined;
  private fairShare: { day: string; readAt: number; view: FairShareView } | undefined;
  private kept: KeptPlan | undefined;

  private readonly reported: boolean;
  private readonly clock: () => number;

  /**
   * `changesReported`: the owner reports every change to the runs and sandbox pods
   * (runChanged, sandboxPodChanged), as the controller's watches do. Without, nothing is
   * kept: each look makes its own plan and reads every input, as a reconciler driven by hand
   * (the local CLI, tests over snapshots) must.
   */
  constructor(options: { changesReported: boolean; clock?: () => number }) {
    this.reported = options.changesReported;
    this.clock = options.clock ?? Date.now;
  }

  /** The run watch saw a run change (`previous` undefined: first seen, or deleted). */
  runChanged(previous: CodingRun | undefined, run: CodingRun): void {
    if (admissionFactsChanged(previous, run)) this.changes++;
  }

  /** The pod watch saw a sandbox pod change: a finished run's slot may have freed. */
  sandboxPodChanged(): void {
    this.changes++;
  }

  /**
   * A watched namespace set aside (watched-namespaces.ts) has listed: its runs, out of the plans
   * until now, join them. Its runs may all have been reported while another of its lists still
   * failed, so no run change says so.
   */
  namespaceListed(): void {
    this.changes++;
  }

  /** The namespaces with runs waiting (no phase, or Pending), counted again only after a run changed. */
  waitingNamespaces(list: () => readonly CodingRun[]): ReadonlySet<string> {
    if (this.reported && this.namespaces?.changes === this.changes) return this.namespaces.waiting;
    const waiting = new Set<string>();
    for (const run of list()) {
      const phase = run.status?.phase;
      if (phase === undefined || phase === 'Pending') waiting.add(run.metadata.namespace);
    }
    this.namespaces = { changes: this.changes, waiting };
    return waiting;
  }

  /**
   * The policies and tallies of `namespaces` on `day`: those read last while they are fresh
   * and hold every namespace asked for, else read now. A read that finds what makes the same
   * plans as the last one (sameForPlans) keeps the last one's view, so the plan made from it
   * still holds. `own`: the namespace of the run being decided on; when it has a token budget,
   * the tallies are read now whatever their age: a run must not be admitted on a tally read
   * before its namespace spent the last of its day's tokens (a read is one Redis GET a
   * namespace, and one that finds the budget still unspent, or still spent, keeps the plan).
   * A namespace whose policy the last read could not get is tried again with the others, after
   * FAIR_SHARE_TTL_MS; `own`'s always at once (its run is decided with it, or not at all).
   */
  async fairShareOf(
    namespaces: ReadonlySet<string>,
    day: string,
    read: (namespaces: ReadonlySet<string>) => Promise<FairShareView>,
    own?: string,
  ): Promise<FairShareView> {
    const known = this.fairShare;
    const now = this.clock();
    const fresh =
      known !== undefined &&
      known.day === day &&
      now - known.readAt < FAIR_SHARE_TTL_MS &&
      (own === undefined || !known.view.budgets.has(own));
    const holdsEvery = (view: FairShareView) =>
      [...namespaces].every((namespace) => view.policies.has(namespace) || (namespace !== own && view.unreadable.has(namespace)));
    if (this.reported && fresh && holdsEvery(known.view)) return known.view;
    const view = await read(namespaces);
    const latest = this.fairShare;
    const same = latest !== undefined && latest.day === day && sameForPlans(latest.view, view);
    this.fairShare = { day, readAt: now, view: same ? latest.view : view };
    return this.fairShare.view;
  }

  /**
   * Self's admission: read off the plan kept, while nothing it was made from has moved since;
   * else off a plan made now from `source()` (which may settle this process's grants first,
   * so `localChanges` is read again after it). `view` is the fair share the source's context
   * holds.
   */
  admissionOf(self: CodingRun, view: FairShareView, localChanges: () => number, source: () => PlanSource): AdmissionPlan {
    if (!this.reported) {
      const { runs, context } = source();
      return computeAdmission(runs, self, context);
    }
    const kept = this.kept;
    const holds = kept !== undefined && kept.changes === this.changes && kept.view === view && kept.localChanges === localChanges();
    if (!holds) {
      const { runs, context } = source();
      this.kept = { runs, context, plan: planQueue(runs, context), changes: this.changes, localChanges: localChanges(), view };
    }
    const { plan, runs, context } = this.kept!;
    return admissionFrom(plan, runs, self, context);
  }
}
