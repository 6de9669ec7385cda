// Admission: whether a waiting run gets a sandbox slot now, and if not, what holds it and
// where it stands. Pure. It gathers, from the cache, the input of the round-robin decision
// (fair-admission.ts): the waiting runs of each namespace, the free cluster slots
// (maxActiveRuns), each namespace's own limits and the namespace admitted last (the runs'
// admissions, the grants and the leader's mark of the last one, whose run may be gone). The
// controller passes the runs it admitted itself but whose new phase its cache has not seen
// yet, so a burst of new runs cannot be admitted past the limit. One plan (planQueue) answers
// for every waiting run, so the controller keeps it between reconciles
// (controller/admission-plan-cache.ts) until admissionFactsChanged says a run moved.
import { FINALIZER, isTerminal, REASONS, type CodingRun, type HeldBy, type Phase } from '../api/index.ts';
import { findCondition } from './conditions.ts';
import { decideFairAdmission, type NamespaceLimits, type WaitingPlace } from './fair-admission.ts';
import { NAMESPACE_ANNOTATIONS, type NamespacePolicy } from './namespace-policy.ts';
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
  if (isTerminal(phase) || isReleased(run)) return false;
  return ACTIVE.has(phase) || admittedLocally.has(run.metadata.uid);
}

/**
 * A run being deleted that no longer carries the operator's finalizer: its deletion's cleanup
 * is done (or someone removed the finalizer), and no decision writes its phase again. Another's
 * finalizer can keep it in the API server for ever with the phase it had (Running): counted by
 * that phase, it held a slot of maxActiveRuns, its namespace's and every tenant's, with no pod.
 * It holds one only while its pod is still up (holdsSandbox), as a finished run does.
 */
export function isReleased(run: CodingRun): boolean {
  return Boolean(run.metadata.deletionTimestamp) && !run.metadata.finalizers?.includes(FINALIZER);
}

/**
 * Whether the API server refused the run's sandbox (SandboxReady False, SandboxRefused; the
 * condition stays while the run is queued again). Such a run waits behind the runs never
 * refused: a refusal that does not clear by itself (a LimitRange the run's resources exceed)
 * would otherwise take its namespace's turn at every round, and the runs behind it never start.
 */
function wasRefused(run: CodingRun): boolean {
  return findCondition(run.status?.conditions, 'SandboxReady')?.reason === REASONS.SandboxRefused;
}

/**
 * Whether a run waits for a slot. One that waits for its namespace's isolation probe
 * (IsolationNotEnforced) does not: it gives a slot it is granted back at once, unused, so in
 * the other runs' plans it took its namespace's turn at every round, a slot stood free, and
 * the runs behind it waited for a second one. Its own reconcile asks for its admission only
 * once the gate is open (controller/run-reconciler.ts), and is planned then (a run's own plan
 * always counts it).
 */
function isWaiting(run: CodingRun, admittedLocally: ReadonlySet<string>): boolean {
  if (run.metadata.deletionTimestamp) return false;
  const phase = run.status?.phase;
  if (phase === 'Pending' && run.status?.reason === REASONS.IsolationNotEnforced) return false;
  return (phase === undefined || phase === 'Pending') && !admittedLocally.has(run.metadata.uid);
}

/** What the controller cannot see or judge of a namespace now, for inPlanScope. */
export interface PlanScope {
  /**
   * Whether the namespace's caches hold its objects (controller/watched-namespaces.ts: all its
   * lists are in). One set aside (its lists refused: the operator's RoleBinding deleted) is not
   * reconciled, and its cached runs may be only some of them.
   */
  listed(namespace: string): boolean;
  /** Namespaces whose policy could not be read (admission-plan-cache.ts FairShareView). */
  unreadable: ReadonlySet<string>;
  /** Runs this process admitted or granted a slot whose admission the cache may not show yet (AdmissionContext.admittedLocally). */
  admittedLocally: ReadonlySet<string>;
}

/**
 * Whether a plan sees the run. Not a run of a namespace that has not listed: its keys are held
 * until it lists, so a slot a plan granted it was never used, never settled and counted as taken
 * (maxActiveRuns filled with grants); and what it holds cannot be seen, nor counting what was
 * last seen let one tenant hold slots from the others. Not a waiting run of a namespace whose
 * policy cannot be read (its caps and budget are unknown, and its own reconcile fails on the
 * read), though its runs that hold a slot still count: those the cache shows admitted, and those
 * this process admitted or granted a slot whose new phase the cache does not show yet (a read
 * answering 5xx between a run's admission and its watch update must not free its slot).
 */
export function inPlanScope(run: CodingRun, scope: PlanScope): boolean {
  const namespace = run.metadata.namespace;
  if (!scope.listed(namespace)) return false;
  if (!scope.unreadable.has(namespace)) return true;
  const phase = run.status?.phase;
  return (phase !== undefined && phase !== 'Pending') || scope.admittedLocally.has(run.metadata.uid);
}

/** A namespace's token budget for the day, and what its runs spent of it. */
export interface TokenBudgetView {
  tokensPerDay: number;
  usedToday: number;
  /** The UTC day, YYYY-MM-DD. */
  day: string;
}

/**
 * Whether the namespace has spent its budget for the day: all a plan reads of the tally (its
 * runs are admitted nothing), so a tally that only grew leaves a plan as it was.
 */
export function isOutOfBudget(budget: TokenBudgetView | undefined): boolean {
  return budget !== undefined && budget.usedToday >= budget.tokensPerDay;
}

export interface AdmissionContext {
  /** The operator's maxActiveRuns. */
  maxActiveRuns: number;
  /** The operator's namespaceMaxActiveRuns: the cap of a namespace without its own annotation. */
  namespaceMaxActiveRuns?: number;
  admittedLocally: ReadonlySet<string>;
  /**
   * Whether a finished run's sandbox pod is still up: the run's phase is written before its
   * pod is deleted, and maxActiveRuns promises sandboxes, not phases, so the slot is free
   * only once the pod is going.
   */
  holdsSandbox?: (run: CodingRun) => boolean;
  /** The policy of each namespace with waiting runs (namespace-policy.ts); absent is none. */
  policies?: ReadonlyMap<string, NamespacePolicy>;
  /** The token budget of each namespace that has one. */
  budgets?: ReadonlyMap<string, TokenBudgetView>;
  /**
   * Runs this process granted a slot (in admittedLocally too) whose admission its cache does
   * not show yet, by uid: a grant keeps its sequence until the run's status carries it.
   */
  grants?: ReadonlyMap<string, Grant>;
  /**
   * The last admission the leader has seen or granted, kept after its run is gone: read off the
   * runs left alone, a run deleted (ttlSecondsAfterFinished: 0, or by its tenant) as soon as it
   * ended took its namespace's turn and its sequence number back, and that namespace's next run
   * was admitted again in the next one's place (a tenant deleting its runs got twice its share).
   */
  lastAdmitted?: LastAdmission;
}

/** An admission's place in the order: its sequence number and whose turn it was. */
export interface LastAdmission {
  namespace: string;
  sequence: number;
}

/** The later of two admissions (the mark unchanged when `seen` is no later): the leader's mark is only ever raised. */
export function laterAdmission(mark: LastAdmission | undefined, seen: LastAdmission | undefined): LastAdmission | undefined {
  // Not past 2^53: there `sequence + 1` is the same number, the mark could never be passed, and
  // the namespace after it would win every slot until the leader restarts. Only a writer of
  // codingruns/status can set one; the operator's own count never gets there.
  if (seen === undefined || !Number.isSafeInteger(seen.sequence + 1)) return mark;
  return seen.sequence > (mark?.sequence ?? 0) ? seen : mark;
}

/** A slot given to a waiting run by a plan, in the plan's order. */
export interface Grant {
  uid: string;
  namespace: string;
  name: string;
  sequence: number;
  /**
   * This process acted on the grant: it sent the run's pod create or claim, or its status write
   * with this sequence (the controller marks it before sending, as an answer that fails, a 409
   * or a timeout, may come after the pod or the write landed). The run may be admitted and its
   * pod up, so the grant stands whatever its namespace's budget reads now.
   */
  used?: true;
}

/**
 * Self's admission, and every run the plan admits now. The caller keeps those grants (as
 * admitted locally) and wakes their runs: a plan is made once and carried out by each run's
 * own reconcile, so runs reconciled side by side, or out of the plan's order, cannot make two
 * plans that disagree on whose turn it is.
 */
export interface AdmissionPlan {
  admission: Admission;
  granted: Grant[];
  /**
   * The grant self held, taken back: its namespace spent its tokens after the plan that granted
   * it (keptGrant). The caller forgets it, and self's slot is free again.
   */
  withdrawn?: Grant;
}

/** The runs that hold a slot, per namespace and in all. */
function countActive(runs: readonly CodingRun[], self: CodingRun | undefined, context: AdmissionContext) {
  const perNamespace = new Map<string, number>();
  let total = 0;
  for (const other of runs) {
    if (other.metadata.uid === self?.metadata.uid) continue;
    const holds =
      isActive(other, context.admittedLocally) ||
      ((isTerminal(other.status?.phase) || isReleased(other)) && (context.holdsSandbox?.(other) ?? false));
    if (!holds) continue;
    total++;
    perNamespace.set(other.metadata.namespace, (perNamespace.get(other.metadata.namespace) ?? 0) + 1);
  }
  return { total, perNamespace };
}

/**
 * The admission made last (the highest sequence among the runs' status.admission, the grants and
 * the leader's mark), whose namespace's turn has passed.
 */
function lastAdmission(runs: readonly CodingRun[], context: AdmissionContext): { namespace?: string; sequence: number } {
  let last = context.lastAdmitted;
  for (const run of runs) last = laterAdmission(last, recordedAdmission(run));
  for (const grant of context.grants?.values() ?? []) last = laterAdmission(last, grant);
  return last ?? { sequence: 0 };
}

/** The run's admission as its status records it, if it has one. */
export function recordedAdmission(run: CodingRun): LastAdmission | undefined {
  const sequence = run.status?.admission?.sequence;
  return sequence !== undefined ? { namespace: run.metadata.namespace, sequence } : undefined;
}

function queuedMessage(
  heldBy: HeldBy,
  namespace: string,
  facts: { active: number; perNamespace: number; position?: number },
  context: AdmissionContext,
): string {
  const policy = context.policies?.get(namespace);
  const problems = policy?.problems.length ? ` (the annotation is malformed: ${policy.problems.join('; ')})` : '';
  switch (heldBy) {
    case 'ClusterSlots':
      return (
        `Queued: position ${facts.position} for a sandbox slot; all ${context.maxActiveRuns} slots of the cluster (operator maxActiveRuns) ` +
        `are taken (${facts.active} active). Namespaces take turns for the slots that free up.`
      );
    case 'NamespaceActiveRuns': {
      const cap = namespaceCap(namespace, context);
      const source =
        policy?.maxActiveRuns !== undefined
          ? `annotation ${NAMESPACE_ANNOTATIONS.maxActiveRuns}`
          : `operator namespaceMaxActiveRuns; annotation ${NAMESPACE_ANNOTATIONS.maxActiveRuns} sets another`;
      return (
        `Queued: namespace ${namespace} has ${facts.perNamespace} of its ${cap ?? 0} runs active ` +
        `(${source})${problems}; the run waits until one of them ends.`
      );
    }
    case 'NamespaceTokenBudget': {
      // Not how much was spent: the namespace's running runs add to it at each model call, and
      // a message carrying it was rewritten at each queued run's look (QUEUED_RECHECK_MS), a
      // status write per queued run every 30 s. The figure is the chamvi_namespace_tokens_today gauge.
      const budget = context.budgets?.get(namespace);
      return (
        `Queued: namespace ${namespace} has spent its ${budget?.tokensPerDay ?? 0} tokens for ${budget?.day ?? 'today'} ` +
        `(annotation ${NAMESPACE_ANNOTATIONS.tokensPerDay})${problems}; new runs wait until the budget resets at 00:00 UTC or an admin raises it.`
      );
    }
  }
}

/** A namespace's cap on active runs: its annotation, else the operator's default for every namespace, else none. */
function namespaceCap(namespace: string, context: AdmissionContext): number | undefined {
  return context.policies?.get(namespace)?.maxActiveRuns ?? context.namespaceMaxActiveRuns;
}

/** The order a namespace's waiting runs are served in: runs never refused first, then oldest first. */
function queueOrder(a: CodingRun, b: CodingRun): number {
  return Number(wasRefused(a)) - Number(wasRefused(b)) || (createdBefore(a, b) ? -1 : createdBefore(b, a) ? 1 : 0);
}

/**
 * The waiting run each namespace serves next: the runs to wake when a slot frees or the queue
 * changes. Any waiting run's reconcile makes the same plan and wakes the runs it grants a slot
 * (computeAdmission), so one per namespace is enough to hand out the slots, and these are the
 * runs whose places (1, 2, ...) a freed slot changes most. Waking every queued run instead cost
 * a reconcile and a status write per queued run for each freed slot: with hundreds queued,
 * writes quadratic in the queue's length. The runs behind see their new place at their own
 * recheck (QUEUED_RECHECK_MS).
 */
export function queueHeads(runs: readonly CodingRun[], admittedLocally: ReadonlySet<string>): CodingRun[] {
  const heads = new Map<string, CodingRun>();
  for (const run of runs) {
    if (!isWaiting(run, admittedLocally)) continue;
    const head = heads.get(run.metadata.namespace);
    if (!head || queueOrder(run, head) < 0) heads.set(run.metadata.namespace, run);
  }
  return [...heads.values()];
}

/**
 * The plan of a moment: who holds a slot, and the round-robin's answer for every waiting run.
 * Every waiting run's admission is read off the same plan (admissionFrom), so the controller
 * makes it once for all of them instead of once for each (W runs cost W plans, each sorting
 * the W: 65 s of CPU every 30 s at 5000 queued runs).
 */
export interface QueuePlan {
  /** Runs holding a slot. */
  total: number;
  perNamespace: ReadonlyMap<string, number>;
  /** The slots the plan gives, in its order; by uid in `grantOf`. */
  grants: Grant[];
  grantOf: ReadonlyMap<string, Grant>;
  /** Every waiting run not granted a slot, and what holds it. */
  waiting: ReadonlyMap<string, WaitingPlace>;
}

/** `self`: a run planned as waiting whatever its phase, and not counted as holding a slot (its own plan). */
function makePlan(runs: readonly CodingRun[], context: AdmissionContext, self?: CodingRun): QueuePlan {
  const { total, perNamespace } = countActive(runs, self, context);
  const waiting = runs.filter((run) => run.metadata.uid === self?.metadata.uid || isWaiting(run, context.admittedLocally));
  waiting.sort(queueOrder);
  const queued = new Map<string, string[]>();
  for (const run of waiting) {
    const list = queued.get(run.metadata.namespace) ?? [];
    list.push(run.metadata.uid);
    queued.set(run.metadata.namespace, list);
  }
  const limits = new Map<string, NamespaceLimits>();
  for (const namespace of queued.keys()) {
    const maxActiveRuns = namespaceCap(namespace, context);
    const budget = context.budgets?.get(namespace);
    limits.set(namespace, {
      active: perNamespace.get(namespace) ?? 0,
      ...(maxActiveRuns !== undefined ? { maxActiveRuns } : {}),
      ...(isOutOfBudget(budget) ? { outOfBudget: true } : {}),
    });
  }
  const last = lastAdmission(runs, context);
  const decision = decideFairAdmission({
    queued,
    freeSlots: context.maxActiveRuns - total,
    limits,
    ...(last.namespace !== undefined ? { lastServed: last.namespace } : {}),
  });
  const byUid = new Map(waiting.map((run) => [run.metadata.uid, run]));
  const grants = decision.admitted.map((uid, index) => {
    const run = byUid.get(uid)!;
    return { uid, namespace: run.metadata.namespace, name: run.metadata.name, sequence: last.sequence + 1 + index };
  });
  return { total, perNamespace, grants, grantOf: new Map(grants.map((grant) => [grant.uid, grant])), waiting: decision.waiting };
}

/** The plan for every waiting run as the cache shows it; each one's admission is admissionFrom's. */
export function planQueue(runs: readonly CodingRun[], context: AdmissionContext): QueuePlan {
  return makePlan(runs, context);
}

/**
 * A slot this process granted the run, which no plan takes back, unless the run's namespace has
 * spent its tokens since (the budget read now, at the run's own look): the plan that granted it
 * may have been another namespace's run's, made on a tally up to FAIR_SHARE_TTL_MS old
 * (controller/admission-plan-cache.ts), and the grant admitted a run its namespace's budget
 * holds. Not once this process acted on it (Grant.used): the run's pod may be up, and a slot
 * given back then would admit one run over maxActiveRuns.
 */
function keptGrant(self: CodingRun, context: AdmissionContext): Grant | undefined {
  const granted = context.grants?.get(self.metadata.uid);
  if (!granted || granted.used) return granted;
  return isOutOfBudget(context.budgets?.get(self.metadata.namespace)) ? undefined : granted;
}

function admissionIn(plan: QueuePlan, self: CodingRun, context: AdmissionContext): AdmissionPlan {
  const mine = plan.grantOf.get(self.metadata.uid);
  if (mine) return { admission: { admit: true, sequence: mine.sequence }, granted: plan.grants };
  const place = plan.waiting.get(self.metadata.uid)!;
  const namespace = self.metadata.namespace;
  return { admission: queuedAdmission(place, namespace, plan.total, plan.perNamespace, context), granted: plan.grants };
}

/** Self's admission from a plan of its own, made from the cache as it is. */
export function computeAdmission(runs: readonly CodingRun[], self: CodingRun, context: AdmissionContext): AdmissionPlan {
  const kept = keptGrant(self, context);
  if (kept) return { admission: { admit: true, sequence: kept.sequence }, granted: [] };
  // A grant taken back: self is planned as it would be without it (its own plan does not count
  // it as holding a slot), held by its namespace's budget; the slot goes on to another run.
  const made = admissionIn(makePlan(runs, context, self), self, context);
  const withdrawn = context.grants?.get(self.metadata.uid);
  return withdrawn ? { ...made, withdrawn } : made;
}

/**
 * Self's admission read off `plan` (planQueue of the same runs and context): what
 * computeAdmission answers, without a plan of its own. A run the cache shows waiting holds no
 * slot, so its own plan and the shared one are the same plan. One the shared plan does not
 * hold (its cached status still waits for its namespace's isolation probe, which its own look
 * found open; admitted by this process, granted a slot or not; or not in the cache as waiting)
 * gets computeAdmission's answer: a run's own plan always counts it.
 */
export function admissionFrom(plan: QueuePlan, runs: readonly CodingRun[], self: CodingRun, context: AdmissionContext): AdmissionPlan {
  const uid = self.metadata.uid;
  const inPlan = !context.grants?.has(uid) && (plan.grantOf.has(uid) || plan.waiting.has(uid));
  return inPlan ? admissionIn(plan, self, context) : computeAdmission(runs, self, context);
}

/**
 * Whether a change to a run can change a plan (planQueue): the fields admission reads
 * (isWaiting, isActive, isReleased, wasRefused, queueOrder, lastAdmission; the pod looked up for a
 * finished run). A queued run's new place (its message, status.queue) and a step's progress
 * are not among them, so the writes of those leave the plan as it was.
 */
export function admissionFactsChanged(previous: CodingRun | undefined, run: CodingRun): boolean {
  if (!previous) return true;
  const [was, is] = [previous.metadata, run.metadata];
  return (
    was.uid !== is.uid ||
    was.namespace !== is.namespace ||
    was.name !== is.name ||
    was.creationTimestamp !== is.creationTimestamp ||
    Boolean(was.deletionTimestamp) !== Boolean(is.deletionTimestamp) ||
    isReleased(previous) !== isReleased(run) ||
    previous.status?.phase !== run.status?.phase ||
    previous.status?.reason !== run.status?.reason ||
    previous.status?.podName !== run.status?.podName ||
    previous.status?.admission?.sequence !== run.status?.admission?.sequence ||
    wasRefused(previous) !== wasRefused(run)
  );
}

function queuedAdmission(
  place: { heldBy: HeldBy; position?: number },
  namespace: string,
  total: number,
  perNamespace: ReadonlyMap<string, number>,
  context: AdmissionContext,
): Admission {
  return {
    admit: false,
    heldBy: place.heldBy,
    ...(place.position !== undefined ? { position: place.position } : {}),
    message: queuedMessage(
      place.heldBy,
      namespace,
      {
        active: total,
        perNamespace: perNamespace.get(namespace) ?? 0,
        ...(place.position !== undefined ? { position: place.position } : {}),
      },
      context,
    ),
  };
}
