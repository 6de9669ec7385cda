// The controller's brain: given what was observed about one run, the operator config and
// the time, decide what to do. Pure and level-triggered: it reads the whole current state
// every time and never trusts the event that caused the call.
import {
  CONDITION_REASONS,
  EVENT_REASONS,
  FINALIZER,
  REASONS,
  durationMs,
  isTerminal,
  type CodingRun,
  type CodingRunStatus,
  type Phase,
} from '../api/index.ts';
import { codingRunSpecFields } from '../api/coding-run-spec.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { APPROVAL_ANNOTATION, answerActsOn, readApprovalAnnotation, type ApprovalAnswer } from './approval-answer.ts';
import { separationOfDutiesRefusal } from './separation-of-duties.ts';
import { approvalWaitEnd, approvalWaitMs, countedApprovalWaitMs } from './approval-wait.ts';
import { FAILURE_MESSAGES } from '../api/failure-messages.ts';
import { RUNNING_MESSAGE, enterPhase, finishStatus, type TerminalPhase } from './run-status-transitions.ts';
import { cancelledMessage, readCancelRequest } from './cancel-request.ts';
import { keptDiffResult, withDiffNote } from './kept-diff.ts';
import { setCondition, findCondition, type ConditionUpdate } from './conditions.ts';
import { observedAgain, withPhaseConditions } from './phase-conditions.ts';
import { alreadyFinishedMessage, appliesToRun, finishedRunRecord } from './finished-runs.ts';
import type { Action, Decision, RunEvent } from './decision.ts';
import { networkPolicyName, runPodName, sandboxPodName } from './names.ts';
import type { AgentView, IgnoredApproval, ObservedRun, RefusedObject, SandboxPodView, SeenApproval, TakenName } from './observed-run.ts';
import { buildSandboxPod, sandboxActiveDeadlineSeconds } from './sandbox-pod.ts';
import { isSandboxPolicyAsWanted, sandboxPoliciesFor } from './sandbox-network-policy.ts';
import { ISOLATION_RECHECK_MS, isolationGate } from './isolation.ts';
import { claimTimings, mergeTimings, sandboxTimings } from './run-timings.ts';
import { warmPoolFor } from './warm-pool.ts';
import { checkRunAllowLists, parseSpec, validateRun, type Refusal } from './validate-run.ts';
import { effectiveSpecInput } from './run-template.ts';
import { pinAfterAcceptance, pinContinueFrom } from './continue-from-pin.ts';
import { takenDownEndingMessage } from './unwritable-run.ts';

/** While a run waits in the queue, look again at least this often (a safety net for missed wake-ups). */
export const QUEUED_RECHECK_MS = 30_000;
/**
 * While the agent works on a run, look at it this often: nothing else would notice that
 * Redis lost its state or jobs (a restart without persistence), and the run would sit in
 * Running until its deadline.
 */
export const AGENT_RECHECK_MS = 15_000;

/** A run the API server refused a sandbox object for (a quota, a policy) tries again this often. */
export const REFUSED_RECHECK_MS = 10_000;

/**
 * Whether a refusal may clear without the run changing: a 403 is a quota, an admission
 * policy or webhook, or RBAC, which an admin (or other runs finishing) can change; so is a
 * 422 whose message says an admission policy denied it (a ValidatingAdmissionPolicy answers
 * Invalid by default), and a 5xx, a failure on the API server's side. Any other 422 or a 400
 * is the object itself: invalid as derived from the run, the same every time.
 */
export function refusalMayClear(refused: RefusedObject): boolean {
  return refused.code === 403 || refused.code >= 500 || /is forbidden|denied (the )?request|admission webhook/i.test(refused.message);
}

function refusedMessage(refused: RefusedObject, mayClear: boolean): string {
  if (refused.code >= 500)
    return (
      `The API server failed to write the run's ${refused.kind} ${refused.name} (HTTP ${refused.code}): ${refused.message.slice(0, 2048)}. ` +
      `The run stays Pending and tries again every ${REFUSED_RECHECK_MS / 1000}s; nothing in it needs to change. ` +
      'If this lasts, an admin can look at the API server and the admission webhooks it calls.'
    );
  const what = `The API server refused the run's ${refused.kind} ${refused.name} (HTTP ${refused.code}): ${refused.message.slice(0, 2048)}`;
  return mayClear
    ? `${what}. The run stays Pending and tries again every ${REFUSED_RECHECK_MS / 1000}s: raise the namespace's ResourceQuota, ` +
        'or ask an admin to allow the object (admission policy, RBAC), or delete the run.'
    : `${what}. Retrying cannot help: change the run (a shorter metadata.name, or the spec field the message names) and create it again.`;
}

/** Why a started run can no longer go on, judged from what the agent holds of it. */
export function agentLoss(agent: AgentView | undefined): { reason: string; message: string } | undefined {
  if (!agent || agent.moving) return undefined;
  // Security #11.1: a state not written by the operator is never acted on, nor waited on.
  if (agent.invalidState !== undefined) return { reason: REASONS.StateLost, message: agent.invalidState };
  if (agent.state === 'missing') {
    return { reason: REASONS.StateLost, message: FAILURE_MESSAGES.stateGone };
  }
  // A run parked on an approval waits for a human, not for a job.
  if (agent.state === 'waiting') return undefined;
  if (agent.failedJob !== undefined) {
    return { reason: REASONS.AgentFailed, message: FAILURE_MESSAGES.agentStopped(agent.failedJob) };
  }
  return { reason: REASONS.StateLost, message: FAILURE_MESSAGES.noJobLeft };
}

/**
 * What the write that started the agent records, for a run whose agent is working: that it was
 * accepted, the pod it runs in, and that the pod was ready. The controller starts the agent
 * first and writes after it (a crash between leaves a job, not a Running run without one); when
 * that write meets a conflict, a worker's step may write Running before the controller writes
 * again, and the decision made then starts past the phases that record these. So they follow
 * from what is observed, not from the transition: a run can only have reached Running accepted,
 * in a ready pod (the one found now; a claimed pool pod is found by its labels).
 */
function recordAgentStart(builder: StatusBuilder, pod: SandboxPodView): void {
  const { status } = builder;
  if (findCondition(status.conditions, 'Accepted')?.status !== 'True')
    builder.condition({ type: 'Accepted', status: 'True', reason: REASONS.Valid, message: 'The run is valid.' });
  status.podName ??= pod.name;
  if (findCondition(status.conditions, 'SandboxReady')?.status !== 'True' && pod.ready) builder.condition(sandboxReady(pod));
}

/** SandboxReady=True for the run's ready pod, made for it or claimed from a pool. */
function sandboxReady(pod: SandboxPodView): ConditionUpdate {
  return {
    type: 'SandboxReady',
    status: 'True',
    reason: pod.claimed ? CONDITION_REASONS.WarmPodClaimed : CONDITION_REASONS.PodReady,
    message: pod.claimed ? `Claimed warm sandbox pod ${pod.name}.` : `Sandbox pod ${pod.name} is ready.`,
  };
}

/** Whole seconds as a duration users write (1920 → 32m), for messages. */
function durationText(seconds: number): string {
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = seconds % 60;
  return `${hours ? `${hours}h` : ''}${minutes ? `${minutes}m` : ''}${rest || seconds === 0 ? `${rest}s` : ''}`;
}

/**
 * For a run ended at its budget whose approval waits passed config.maxApprovalWaitSeconds (a
 * run started before the bound, or answers that reached a worker late): the waits past it were
 * counted as the run's time, which its author cannot tell from status alone.
 */
function waitsPastAllowanceNote(waitedMs: number, maxMs: number): string {
  if (waitedMs <= maxMs) return '';
  return (
    ` It waited ${durationText(Math.floor(waitedMs / 1000))} for approvals in all, of which the operator's maxApprovalWaitSeconds ` +
    `(${durationText(maxMs / 1000)}) moved its deadline on; the rest counted as its own time.`
  );
}

/** The sandbox pod's own limit, as the kubelet counts it, and when the controller ends the run for it. */
interface SandboxLimit {
  podName: string;
  /** activeDeadlineSeconds, as a duration. */
  limit: string;
  /** status.startTime plus activeDeadlineSeconds: the kubelet ends the pod then. */
  podEndsAt: number;
  /** When the controller ends the run, to take its diff from the sandbox while it is still up. */
  runEndsBy: number;
}

/**
 * The pod's limit, once a kubelet has started it (undefined before: the spec's deadline alone
 * holds). The controller ends the run deadlineGraceSeconds before it: the margin the pod is
 * made with between the controller's deadline (timeout + grace) and its own (timeout + 2 ×
 * grace), which already has to cover ending a run and taking its diff from the live sandbox
 * (and a node clock a little ahead of the operator's: the kubelet counts by its own).
 * So a pod made for the budget as it is never ends a run first; one made for a smaller budget
 * (raised since: a pod's activeDeadlineSeconds can be lowered, never raised) does, with the
 * diff taken from the sandbox rather than the last step's snapshot.
 */
function sandboxLimit(pod: SandboxPodView | undefined, config: OperatorConfig): SandboxLimit | undefined {
  if (!pod?.startTime || pod.activeDeadlineSeconds === undefined) return undefined;
  const podEndsAt = Date.parse(pod.startTime) + pod.activeDeadlineSeconds * 1000;
  if (Number.isNaN(podEndsAt)) return undefined;
  return {
    podName: pod.name,
    limit: durationText(pod.activeDeadlineSeconds),
    podEndsAt,
    runEndsBy: podEndsAt - config.deadlineGraceSeconds * 1000,
  };
}

/**
 * What the run's SandboxReady condition and a Warning Event say when the pod's limit ends the
 * run before its budget would. `raised`: the pod's limit is shorter than the spec as it is now
 * would make it (counted from the run's start, as a claimed pool pod's is set); otherwise the
 * run waited for approvals longer than the pod allowed for.
 */
function sandboxLimitNote(limit: SandboxLimit, timeout: string, raised: boolean): string {
  const endsBy = new Date(limit.runEndsBy).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const more = 'Create a new run (spec.continueFrom) for more time.';
  return raised
    ? `spec.budget was raised after the sandbox started (budget.timeout is now ${timeout}), but its pod ${limit.podName} was made with ` +
        `a ${limit.limit} limit (activeDeadlineSeconds) that Kubernetes cannot extend, so the run ends by ${endsBy}. ${more}`
    : `The run has waited for approvals longer than its sandbox pod ${limit.podName} allowed for: its ${limit.limit} limit ` +
        `(activeDeadlineSeconds) cannot be extended, so the run ends by ${endsBy}, before budget.timeout (${timeout}) runs out. ${more}`;
}

/**
 * Says once that the pod's limit ends the run first: in SandboxReady's message, which keeps it
 * (no other writer touches that condition while the run goes on), and in a Warning Event sent
 * only when that message changes, not at every look. It changes again only with the timeout.
 * A budget lowered again puts the usual message back, without an Event.
 */
function noteSandboxLimit(builder: StatusBuilder, pod: SandboxPodView, note: string | undefined): void {
  const ready = findCondition(builder.status.conditions, 'SandboxReady');
  if (ready?.status !== 'True') return;
  const usual = sandboxReady(pod);
  const message = note ? `${usual.message} ${note}` : usual.message;
  if (ready.message === message) return;
  builder.condition({ ...usual, message });
  if (note) builder.events.push({ type: 'Warning', reason: EVENT_REASONS.TimeoutBeyondSandbox, message: note });
}

function nameTakenMessage(namespace: string, taken: TakenName[]): string {
  const held = taken.map(({ kind, name, why }) => `${kind} ${namespace}/${name} (${why})`).join('; ');
  return (
    `The name of this run's sandbox is held by an object the run does not own: ${held}. The operator neither uses nor deletes it; ` +
    'find out who created it, delete it, and create the run again.'
  );
}

class StatusBuilder {
  status: CodingRunStatus;
  readonly events: RunEvent[] = [];
  constructor(
    private readonly run: CodingRun,
    private readonly now: Date,
  ) {
    this.status = structuredClone(run.status ?? {});
  }

  get generation(): number {
    return this.run.metadata.generation ?? 0;
  }

  condition(update: ConditionUpdate): this {
    this.status.conditions = setCondition(this.status.conditions, update, this.generation, this.now);
    return this;
  }

  phase(phase: Phase, reason: string | undefined, message: string, event?: RunEvent): this {
    const { changed } = enterPhase(this.status, phase, reason, message);
    if (changed && event) this.events.push(event);
    return this;
  }

  finish(phase: TerminalPhase, reason: string, message: string): this {
    const changed = this.status.phase !== phase || this.status.reason !== reason;
    finishStatus(this.status, phase, reason, message, this.generation, this.now);
    if (changed) this.events.push({ type: phase === 'Succeeded' ? 'Normal' : 'Warning', reason, message });
    return this;
  }

  build(): CodingRunStatus {
    this.status.observedGeneration = this.generation;
    return withPhaseConditions(this.status, this.generation, this.now);
  }
}

/** spec.templateRef: which template, at which version, the run was accepted with (status.template). */
function templateNote(run: CodingRun): string {
  const template = run.status?.template;
  if (!run.spec.templateRef || !template) return '';
  return `, from CodingRunTemplate ${template.name}${template.resourceVersion ? ` (resourceVersion ${template.resourceVersion})` : ''}`;
}

/**
 * The most a run may be as JSON, its template's copy included. etcd keeps objects under 1.5 MiB
 * (its default --max-request-bytes), and the operator writes the run's status beside its spec
 * (result, approvals, conditions): a run created just under the limit failed every write, got
 * no phase, and held a slot of maxActiveRuns until it was deleted.
 */
export const MAX_RUN_BYTES = 1024 * 1024;

/** Refuses a run larger than MAX_RUN_BYTES: Failed, InvalidSpec, with nothing of its template copied. */
function refuseTooLarge(run: CodingRun, bytes: number, now: Date): Decision {
  const withoutCopy = { ...run, status: { ...run.status } };
  delete withoutCopy.status.template;
  const builder = new StatusBuilder(withoutCopy, now);
  refuse(builder, {
    reason: REASONS.InvalidSpec,
    message:
      `the run is ${Math.ceil(bytes / 1024)} KiB as the API server stores it${run.spec.templateRef ? ', with its template' : ''}, over the ${MAX_RUN_BYTES / 1024} KiB ` +
      'a run may be (the API server keeps objects under 1.5 MiB, and the run has its status to hold); ' +
      'shorten spec.sandbox.env, spec.task or spec.instructions (or the template) and create the run again',
  });
  return { actions: [], status: builder.build(), events: builder.events };
}

/**
 * Why a started run whose spec no longer parses ended. One the schema refuses was valid for the
 * operator that accepted it: its author needs to hear that this one's rules are stricter (an
 * upgrade), not that the run was always wrong, and that its work is kept to go on from. One
 * whose recorded template is gone (status.template, the operator's own) says so as it is.
 */
function noLongerValidMessage(run: CodingRun, refusal: Refusal): string {
  if (!effectiveSpecInput(run).ok) return refusal.message;
  const problem = refusal.message.replace(/; fix the field and create the run again$/, '');
  return (
    `The run's spec is no longer valid for this operator, whose rules are stricter than those it was accepted under ` +
    `(was the operator upgraded while the run went on?): ${problem}. The agent was stopped and its diff kept: ` +
    `create a new run with the field changed, and spec.continueFrom: {name: ${run.metadata.name}} to go on from this one's work.`
  );
}

function refuse(builder: StatusBuilder, refusal: Refusal): void {
  builder.condition({ type: 'Accepted', status: 'False', reason: refusal.reason, message: refusal.message });
  builder.finish('Failed', refusal.reason, refusal.message);
}

/** A deletion that sent the delete of a pod the cache did not show looks again this soon. */
export const SENT_POD_DELETED_RECHECK_MS = 1_000;

/**
 * The most ConfigMaps one reconcile of a deleted run deletes, one DELETE after another. Anyone
 * who may create ConfigMaps in the namespace can give thousands the run's labels and
 * ownerReference (its uid is readable): deleted in one reconcile, 5000 held one of the
 * controller's few reconcile slots for 25-100 s, and four such runs held them all.
 */
export const CONFIG_MAP_DELETES_PER_RECONCILE = 50;
/**
 * A deletion that deleted ConfigMaps looks again this soon: at once, behind the runs queued
 * already, for the rest or, once none is left, to let the finalizer go.
 */
export const CONFIG_MAPS_DELETED_RECHECK_MS = 0;

/** Deleting a run: remove everything it owns, then let the finalizer go. */
function decideDeletion(observed: ObservedRun): Decision {
  const { run, pod } = observed;
  if (!run.metadata.finalizers?.includes(FINALIZER)) return decideReleasedDeletion(observed);
  const actions: Action[] = [{ type: 'stopAgent' }];
  removeSandbox(observed, actions);
  const configMaps = observed.ownedConfigMaps.slice(0, CONFIG_MAP_DELETES_PER_RECONCILE);
  if (configMaps.length > 0) actions.push({ type: 'deleteConfigMaps', names: configMaps });
  // A pod this process just sent the create of may exist though the cache shows none: it is
  // deleted by its name (gone already is fine), and the finalizer waits for the next look.
  if (!pod && observed.freshPodSent) {
    actions.push({ type: 'deletePod', name: sandboxPodName(run) });
    return { actions, events: [], requeueAfterMs: SENT_POD_DELETED_RECHECK_MS };
  }
  // Only once nothing is left: a finalizer removed early would orphan what is still there
  // (and the garbage collector could take the policy of a pod still being deleted).
  if (!pod && !observed.networkPolicyExists && observed.ownedConfigMaps.length === 0) actions.push({ type: 'removeFinalizer' });
  return { actions, events: [], ...(configMaps.length > 0 ? { requeueAfterMs: CONFIG_MAPS_DELETED_RECHECK_MS } : {}) };
}

/**
 * Deleting a run whose finalizer is gone while another's holds it (someone removed ours): the
 * watch reports no deletion, so nothing else stops what it runs, and its pod (the model's
 * processes in it) ran on. Its agent and sandbox are stopped as a deletion's are; the
 * ConfigMaps go with the run (their ownerReference). Nothing asks to look again: each action
 * is safe to repeat and a pod being deleted is not deleted again, so the run is looked at only
 * when something of it changes, and an agent is stopped once more at each such look while the
 * run is unfinished (one Redis round trip) or its sandbox is still there.
 */
function decideReleasedDeletion(observed: ObservedRun): Decision {
  const { run, pod } = observed;
  const actions: Action[] = [];
  if (pod || observed.networkPolicyExists || observed.freshPodSent || !isTerminal(run.status?.phase)) actions.push({ type: 'stopAgent' });
  removeSandbox(observed, actions);
  // A pod this process just sent the create of: deleted by its name (gone already is fine);
  // once the watch brings it, its change wakes the run again.
  if (!pod && observed.freshPodSent) actions.push({ type: 'deletePod', name: sandboxPodName(run) });
  return { actions, events: [] };
}

/**
 * Removes the run's sandbox: the pod once (a pod being deleted is not deleted again), and a
 * NetworkPolicy of its own (an earlier build made one per run) only once the pod is gone. A
 * pod being deleted runs on for its grace period (longer on a node that stopped answering),
 * and so does whatever the model started in it: the policy fences it in until the end.
 */
function removeSandbox(observed: ObservedRun, actions: Action[]): void {
  const { run, pod } = observed;
  if (pod && !pod.deleting) actions.push({ type: 'deletePod', name: pod.name, ...(pod.uid ? { uid: pod.uid } : {}) });
  if (!pod && observed.networkPolicyExists) actions.push({ type: 'deleteNetworkPolicy', name: networkPolicyName(run) });
}

/** A finished run keeps its status and ConfigMaps; its pod and policy go, and TTL applies. */
function decideFinished(observed: ObservedRun, ttl: number | undefined, now: Date): Decision {
  const { run, pod } = observed;
  const actions: Action[] = [];
  // The agent's state is dropped after the terminal status is written; until the sandbox
  // is gone too, drop it again in case the process died in between.
  if (pod || observed.networkPolicyExists) actions.push({ type: 'stopAgent' });
  removeSandbox(observed, actions);
  // A spec edit of a finished run (GitOps re-applying a new TTL or budget) changes nothing,
  // but kstatus reads a status older than the spec as still in progress: say it was seen.
  const generation = run.metadata.generation ?? 0;
  const status = run.status && run.status.observedGeneration !== generation ? observedAgain(run.status, generation) : undefined;
  const decided = (more: Action[], requeueAfterMs?: number): Decision => ({
    actions: [...actions, ...more],
    events: [],
    ...(status ? { status } : {}),
    ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}),
  });
  const completed = run.status?.completionTime;
  // A run not run again stays: deleted, it would be applied again, and again (#15.2).
  if (ttl === undefined || !completed || run.status?.reason === REASONS.AlreadyFinished) return decided([]);
  const remaining = Date.parse(completed) + ttl * 1000 - now.getTime();
  if (remaining <= 0) {
    const record = finishedRunRecord(run, now);
    return decided([{ type: 'deleteRun', ...(record ? { record } : {}) }]);
  }
  return decided([], remaining);
}

/**
 * The ttlSecondsAfterFinished of a run whose spec does not parse (it ended TemplateNotFound or
 * InvalidSpec): as its spec sets it (laid over its recorded template, when it has one), when the
 * schema would take that value. Without it such a run was kept forever, its TTL ignored. A value
 * the schema refuses is no TTL: the run is kept, as one with none.
 */
function ttlOfUnparsedSpec(run: CodingRun): number | undefined {
  const input = effectiveSpecInput(run);
  const value: unknown = (input.ok ? input.spec : run.spec).ttlSecondsAfterFinished;
  const ttl = codingRunSpecFields.shape.ttlSecondsAfterFinished.safeParse(value);
  return ttl.success ? ttl.data : undefined;
}

/**
 * A run whose pod or policy the API server refused: back to (or still) Pending with
 * SandboxRefused while the cause may clear, or Failed with SandboxInvalid when it cannot.
 * Undefined when nothing was refused.
 */
function decideRefusal(builder: StatusBuilder, refused: RefusedObject[] | undefined): 'wait' | 'fail' | undefined {
  const first = refused?.[0];
  if (!first) return undefined;
  const mayClear = refusalMayClear(first);
  const message = refusedMessage(first, mayClear);
  if (!mayClear) {
    builder.finish('Failed', REASONS.SandboxInvalid, message);
    return 'fail';
  }
  builder.phase('Pending', REASONS.SandboxRefused, message, { type: 'Warning', reason: REASONS.SandboxRefused, message });
  // Pending holds no slot and runs no clock: both start again when the pod is created.
  delete builder.status.startTime;
  delete builder.status.podName;
  builder.condition({ type: 'SandboxReady', status: 'False', reason: REASONS.SandboxRefused, message });
  return 'wait';
}

export function decide(observed: ObservedRun, config: OperatorConfig, now: Date): Decision {
  const { run, pod } = observed;
  if (run.metadata.deletionTimestamp) return decideDeletion(observed);

  const parsed = parseSpec(run);
  if (isTerminal(run.status?.phase)) {
    return decideFinished(observed, parsed.ok ? parsed.spec.ttlSecondsAfterFinished : ttlOfUnparsedSpec(run), now);
  }

  // Before any write that would fail for the run's size (its finalizer, its pod's, the status
  // that copies its template): refused with a status that holds no copy.
  if (observed.objectBytes !== undefined && observed.objectBytes > MAX_RUN_BYTES) return refuseTooLarge(run, observed.objectBytes, now);

  const actions: Action[] = [];
  // Not asked again in the same reconcile once refused: decideRefusal says why instead.
  const finalizerRefused = observed.refused?.some((refused) => refused.kind === 'CodingRun') ?? false;
  if (!run.metadata.finalizers?.includes(FINALIZER) && !finalizerRefused) actions.push({ type: 'addFinalizer' });
  const builder = new StatusBuilder(run, now);
  const done = (requeueAfterMs?: number): Decision => {
    // status.queue says what holds a queued run; once it is not queued, nothing does.
    if (builder.status.phase !== 'Pending' || builder.status.reason !== REASONS.Queued) delete builder.status.queue;
    return {
      actions,
      status: builder.build(),
      events: builder.events,
      ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}),
    };
  };
  const stopSandbox = () => {
    actions.push({ type: 'stopAgent' });
    removeSandbox(observed, actions);
  };

  const phase = run.status?.phase;
  // A run whose agent has started ends keeping its diff (status.result.diffSource): first the
  // keepDiff action takes it (from the pod while it is up, else the last snapshot), then, in
  // the decision made knowing it, the run ends with it.
  const agentStarted = phase === 'Running' || phase === 'WaitingForApproval';
  const podUp = pod !== undefined && pod.phase === 'Running' && !pod.deleting;
  const end = (endPhase: TerminalPhase, reason: string, message: string): Decision => {
    if (agentStarted && !observed.keptDiff) return { actions: [...actions, { type: 'keepDiff', fromSandbox: podUp }], events: [] };
    if (agentStarted) builder.status.result = keptDiffResult(observed.keptDiff!, '');
    // The pod is found by this name once the run is finished: a pool pod claimed by a run that
    // ends before its start was recorded has another name than the one derived from the run.
    if (pod) builder.status.podName ??= pod.name;
    builder.finish(endPhase, reason, observed.keptDiff ? withDiffNote(message, observed.keptDiff) : message);
    stopSandbox();
    return done();
  };

  // The spec is parsed at every look, by this operator's rules: one accepted by an earlier
  // operator may no longer pass them (an upgrade tightened the schema). Such a run that has
  // started ends as any started run does, its diff kept; one that has not is refused.
  if (!parsed.ok) {
    if (agentStarted) return end('Failed', parsed.refusal.reason, noLongerValidMessage(run, parsed.refusal));
    refuse(builder, parsed.refusal);
    stopSandbox();
    return done();
  }
  const spec = parsed.spec;
  const parsedRun = { ...run, spec };

  // 0. Cancel (kubectl codingrun cancel): in any phase, at once; the diff is kept.
  const cancel = readCancelRequest(run);
  if (cancel) return end('Cancelled', REASONS.Cancelled, cancelledMessage(cancel, phase));

  // 1. Accept: validate once, before anything is created.
  if (phase === undefined || phase === 'Pending') {
    if (findCondition(run.status?.conditions, 'Accepted')?.status !== 'True') {
      if (!observed.references) throw new Error('decide: references must be observed for a run that is not accepted yet');
      // #15.2: the same run, applied again after its TTL deleted it, is not run again.
      const before = observed.finishedBefore;
      if (before && appliesToRun(before, run)) {
        const message = alreadyFinishedMessage(before);
        builder.condition({ type: 'Accepted', status: 'False', reason: REASONS.AlreadyFinished, message });
        builder.finish(before.phase as TerminalPhase, REASONS.AlreadyFinished, message);
        return done();
      }
      const refusal = validateRun(run, spec, config, observed.references, observed.namespacePolicy);
      if (refusal) {
        refuse(builder, refusal);
        return done();
      }
      // spec.continueFrom: the source as found now is the only one the run may start from, and
      // only once it has finished (refused before admission, so it takes no slot).
      const continueFrom = pinContinueFrom(run.metadata.namespace, spec, observed.continueFromSource);
      if (!continueFrom.ok) {
        refuse(builder, continueFrom.refusal);
        return done();
      }
      if (continueFrom.pin) builder.status.continuedFrom = continueFrom.pin;
      const message = 'The run is valid.';
      builder.condition({ type: 'Accepted', status: 'True', reason: REASONS.Valid, message });
      builder.events.push({
        type: 'Normal',
        reason: EVENT_REASONS.Accepted,
        message:
          `Accepted: ${spec.repository.url} with ${spec.model.provider}${spec.model.name ? `/${spec.model.name}` : ''}` + templateNote(run),
      });
    }
    // Security #11.8: no sandbox where NetworkPolicy is not shown to be enforced, before a slot is taken.
    const isolation = isolationGate(observed.isolation, config, run.metadata.namespace);
    if (isolation.kind === 'refuse') {
      builder.finish('Failed', REASONS.IsolationNotEnforced, isolation.message);
      return done();
    }
    if (isolation.kind === 'wait') {
      builder.phase('Pending', REASONS.IsolationNotEnforced, isolation.message, {
        type: 'Normal',
        reason: REASONS.IsolationNotEnforced,
        message: isolation.message,
      });
      return done(ISOLATION_RECHECK_MS);
    }
    // 2. Admit while there are free slots, namespaces taking turns (admission.ts, issue #15.4).
    const admission = observed.admission;
    if (!admission) throw new Error('decide: admission must be observed for a run waiting for a slot');
    if (!admission.admit) {
      const { message } = admission;
      const event: RunEvent = { type: 'Normal', reason: REASONS.Queued, message };
      builder.phase('Pending', REASONS.Queued, message, event);
      // Already queued, now for another limit: say so once, as the Event of entering the queue did.
      const heldBefore = run.status?.queue?.heldBy;
      if (heldBefore !== undefined && heldBefore !== admission.heldBy) builder.events.push(event);
      builder.status.queue = { heldBy: admission.heldBy, ...(admission.position !== undefined ? { position: admission.position } : {}) };
      return done(QUEUED_RECHECK_MS);
    }
    // The lists again: an admin may have narrowed the cluster's or the namespace's since the run
    // was accepted (a queued run can wait for hours), and a run starts only within today's.
    const delisted = checkRunAllowLists(run, spec, config, observed.namespacePolicy);
    if (delisted) {
      refuse(builder, { ...delisted, message: `${delisted.message} (checked again as the run was admitted, after it waited)` });
      return done();
    }
    delete builder.status.queue;
    builder.status.admission = { sequence: admission.sequence, time: now.toISOString() };
    const refusal = decideRefusal(builder, observed.refused);
    if (refusal) {
      if (refusal === 'fail') stopSandbox();
      return done(refusal === 'wait' ? REFUSED_RECHECK_MS : undefined);
    }
    builder.phase('Provisioning', undefined, 'Creating the sandbox pod.', {
      type: 'Normal',
      reason: EVENT_REASONS.Provisioning,
      message: `Creating sandbox pod ${sandboxPodName(run)}`,
    });
    builder.status.podName = sandboxPodName(run);
    builder.condition({
      type: 'SandboxReady',
      status: 'False',
      reason: CONDITION_REASONS.Provisioning,
      message: 'The sandbox pod is being created.',
    });
  }

  // Accepted without the pin (recordAgentStart after a lost warm-claim write, or by an operator
  // from before it): pinned now, before any answer is acted on, once its source has finished;
  // until then separation of duties acts on no answer to it.
  if (!builder.status.continuedFrom) {
    const pin = pinAfterAcceptance(run.metadata.namespace, spec, observed.continueFromSource);
    if (pin) builder.status.continuedFrom = pin;
  }

  // 3. The wall clock, from the start of the run. The agent ends a running run at the
  // timeout itself (keeping its partial diff); the controller steps in after a grace.
  // Time waiting for a human is not the run's time: the deadline moves by it, by at most
  // config.maxApprovalWaitSeconds in all (approval-wait.ts). Once the pod has started, its own
  // limit may come first (a budget raised since): the run ends before the kubelet ends the pod,
  // rather than learn of it from the kubelet.
  builder.status.startTime ??= now.toISOString();
  const grace = builder.status.phase === 'Provisioning' ? 0 : config.deadlineGraceSeconds * 1000;
  const runStart = Date.parse(builder.status.startTime!);
  const maxApprovalWaitMs = config.maxApprovalWaitSeconds * 1000;
  const waitedMs = approvalWaitMs(builder.status, now);
  const budgetDeadline = runStart + durationMs(spec.budget.timeout) + grace + countedApprovalWaitMs(waitedMs, maxApprovalWaitMs);
  const limit = sandboxLimit(pod, config);
  const podFirst = limit !== undefined && limit.runEndsBy < budgetDeadline ? limit : undefined;
  const deadline = podFirst?.runEndsBy ?? budgetDeadline;
  if (now.getTime() >= deadline)
    return end(
      'Failed',
      REASONS.DeadlineExceeded,
      podFirst
        ? FAILURE_MESSAGES.deadlineAtSandboxLimit(podFirst.podName, podFirst.limit, spec.budget.timeout)
        : FAILURE_MESSAGES.deadlineAtController(spec.budget.timeout) + waitsPastAllowanceNote(waitedMs, maxApprovalWaitMs),
    );
  const untilDeadline = deadline - now.getTime();

  // 4. The sandbox: create it, wait for it, notice when it is lost.
  const currentPhase = builder.status.phase;
  // An object the run does not own holds its pod's or policy's name: exec'ing into such a
  // pod would hand the workspace (and the model's tool calls) to whoever made it, and
  // deleting it would delete someone else's object. The run fails; the object stays.
  const taken = observed.takenNames ?? [];
  if (taken.length > 0) {
    builder.finish('Failed', REASONS.SandboxNameTaken, nameTakenMessage(run.metadata.namespace, taken));
    stopSandbox();
    return done();
  }
  // Not lost: the operator took it down, the run too large for any write (unwritable-run.ts).
  const takenDown = observed.sandboxTakenDown;
  if (takenDown && (!pod || pod.deleting || pod.phase === 'Failed' || pod.phase === 'Succeeded'))
    return end('Failed', REASONS.InvalidSpec, takenDownEndingMessage(takenDown));
  // A pod that merely turns unready is not lost (readiness can flap); one that ended is.
  if (pod && (pod.phase === 'Failed' || pod.phase === 'Succeeded' || pod.deleting)) {
    if (pod.reason === 'DeadlineExceeded')
      return end(
        'Failed',
        REASONS.DeadlineExceeded,
        FAILURE_MESSAGES.deadlineAtPod(
          spec.budget.timeout,
          pod.activeDeadlineSeconds === undefined ? undefined : durationText(pod.activeDeadlineSeconds),
        ),
      );
    const why = pod.deleting ? 'is being deleted' : `is ${pod.phase}${pod.reason ? ` (${pod.reason})` : ''}`;
    return end('Failed', REASONS.SandboxLost, FAILURE_MESSAGES.sandboxLost(pod.name, why));
  }
  if (!pod && currentPhase !== 'Provisioning') {
    return end('Failed', REASONS.SandboxLost, FAILURE_MESSAGES.sandboxLost(runPodName(run), 'disappeared'));
  }
  // A Provisioning run whose pod the API server refuses (it was there, and went): as at admission.
  if (!pod && observed.refused?.length) {
    const refusal = decideRefusal(builder, observed.refused);
    if (refusal === 'fail') stopSandbox();
    return done(refusal === 'wait' ? REFUSED_RECHECK_MS : undefined);
  }
  // The namespace's sandbox policies before the pod (and again if someone deleted or edited them).
  if (config.networkPolicy)
    for (const policy of sandboxPoliciesFor(parsedRun, config))
      if (!observed.sandboxPolicies?.some((found) => isSandboxPolicyAsWanted(found, policy)))
        actions.push({ type: 'ensureSandboxPolicy', policy });
  if (!pod) {
    const fresh = buildSandboxPod(parsedRun, config);
    const claim = observed.warmClaim;
    if (claim && 'podName' in claim) {
      // A claimed pool pod was chosen Ready: the run goes on at once, in this one write.
      const message = `Claimed warm sandbox pod ${claim.podName}.`;
      builder.status.podName = claim.podName;
      builder.condition({ type: 'SandboxReady', status: 'True', reason: CONDITION_REASONS.WarmPodClaimed, message });
      builder.status.timings = mergeTimings(
        builder.status.timings,
        claimTimings(run.metadata.creationTimestamp, builder.status.startTime, now),
      );
      builder.phase('Running', undefined, RUNNING_MESSAGE, {
        type: 'Normal',
        reason: EVENT_REASONS.SandboxReady,
        message: `Claimed warm sandbox pod ${claim.podName}; starting the agent`,
      });
      actions.push({ type: 'startAgent', podName: claim.podName });
      return done(Math.min(untilDeadline, AGENT_RECHECK_MS));
    }
    // A run whose fresh pod was created (or its create sent) in an earlier reconcile, which the
    // pod cache has not caught up with, goes on with that pod (the create again meets it): a
    // pool pod claimed now was a second sandbox, which ran on unnamed by status until its deadline.
    const match = claim || observed.freshPodSent ? undefined : warmPoolFor(parsedRun, config, config.warmPools);
    if (match?.pool) {
      return {
        actions: [...actions, { type: 'claimWarmPod', pool: match.pool, activeDeadlineSeconds: fresh.spec!.activeDeadlineSeconds! }],
        events: [],
      };
    }
    actions.push({ type: 'createPod', pod: fresh });
    return done(untilDeadline);
  }
  if (currentPhase === 'Provisioning') {
    if (!pod.ready) {
      const message = `Sandbox pod ${pod.name} is ${pod.phase}${pod.reason ? `: ${pod.reason}` : ''}${pod.message ? ` (${pod.message})` : ''}.`;
      // A pod that will not become Ready gives the run's slot up, rather than hold it until budget.timeout.
      const readyBy = Date.parse(builder.status.startTime!) + config.sandboxReadyTimeoutSeconds * 1000;
      if (now.getTime() >= readyBy)
        return end(
          'Failed',
          REASONS.SandboxNotReady,
          FAILURE_MESSAGES.sandboxNotReady(pod.name, config.sandboxReadyTimeoutSeconds, message),
        );
      builder.condition({ type: 'SandboxReady', status: 'False', reason: pod.reason ?? CONDITION_REASONS.PodNotReady, message });
      return done(Math.min(untilDeadline, readyBy - now.getTime()));
    }
    builder.condition(sandboxReady(pod));
    // A pool pod claimed by a reconcile that died before its status write is found by its labels.
    builder.status.podName = pod.name;
    // Folded into this write, which the run makes anyway: timing a run costs no request.
    builder.status.timings = mergeTimings(
      builder.status.timings,
      pod.claimed
        ? claimTimings(run.metadata.creationTimestamp, builder.status.startTime, now)
        : sandboxTimings({
            createdAt: run.metadata.creationTimestamp,
            admittedAt: builder.status.startTime,
            scheduledAt: pod.scheduledAt,
            readyAt: now,
          }),
    );
    builder.phase('Running', undefined, RUNNING_MESSAGE, {
      type: 'Normal',
      reason: EVENT_REASONS.SandboxReady,
      message: `Sandbox pod ${pod.name} is ready; starting the agent`,
    });
    actions.push({ type: 'startAgent', podName: pod.name });
  }
  // 5. The agent: a started run lives in Redis (its state, and a job that moves it on or a
  // human it waits for). When those are gone, say so now rather than at the deadline.
  const agentWorking = currentPhase === 'Running' || currentPhase === 'WaitingForApproval';
  if (agentWorking) recordAgentStart(builder, pod!);
  // Which outgrew the pod: its budget (raised since: the pod cannot hold even the budget with no
  // wait), or the approval waits (a pod made when it allowed fewer: before maxApprovalWaitSeconds
  // was raised, or by an operator that allowed one wait per step).
  const budgetAlone = { ...parsedRun, spec: { ...spec, approval: { ...spec.approval, tools: [], publish: false } } };
  const raised = podFirst !== undefined && podFirst.podEndsAt - runStart < sandboxActiveDeadlineSeconds(budgetAlone, config) * 1000;
  noteSandboxLimit(builder, pod!, podFirst && sandboxLimitNote(podFirst, spec.budget.timeout, raised));
  const lost = agentWorking ? agentLoss(observed.agent) : undefined;
  if (lost) return end('Failed', lost.reason, lost.message);
  const recheck = Math.min(untilDeadline, AGENT_RECHECK_MS);

  // 6. A run parked on an approval: pass on a matching answer, or deny at the timeout, or once
  // the run's waits reach config.maxApprovalWaitSeconds in all (approval-wait.ts): then it goes
  // on, on its own time, rather than hold its slot and pod while it asks again at every step.
  const pending = run.status?.pendingApproval;
  if (currentPhase === 'WaitingForApproval' && pending) {
    const reading = readApprovalAnnotation(run);
    const waitEnd = approvalWaitEnd(
      Date.parse(pending.requestedAt),
      durationMs(spec.approval.timeout),
      (run.status?.approvalWaitSeconds ?? 0) * 1000,
      maxApprovalWaitMs,
    );
    const timeoutAt = waitEnd.at;
    // An ignored answer stays in the annotation until someone changes it, and the run is looked
    // at every AGENT_RECHECK_MS while it waits (up to approval.timeout, a week): it is warned of
    // once, when it is new, not with a Warning Event at every look.
    let ignored: IgnoredApproval | undefined;
    const ignore = (message: string) => {
      ignored = { approvalId: pending.id, annotation: run.metadata.annotations?.[APPROVAL_ANNOTATION] ?? '' };
      const before = observed.ignoredApproval;
      if (before?.approvalId === ignored.approvalId && before.annotation === ignored.annotation) return;
      builder.events.push({ type: 'Warning', reason: EVENT_REASONS.ApprovalIgnored, message });
    };
    let seen: SeenApproval | undefined;
    let lookUp: ApprovalAnswer | undefined;
    const decided = (requeueAfterMs: number): Decision => ({
      ...done(requeueAfterMs),
      ...(ignored ? { ignoredApproval: ignored } : {}),
      ...(seen ? { seenApproval: seen } : {}),
      ...(lookUp ? { lookUpQueuedAnswer: lookUp } : {}),
    });
    // Separation of duties: the policy judged the answer as the run was when it was written,
    // maybe before status.template named the template's writer (separation-of-duties.ts).
    const barred =
      reading.kind === 'answer' && reading.answer.id === pending.id && config.approvalSeparationOfDuties
        ? separationOfDutiesRefusal({ ...parsedRun, status: builder.status }, reading.answer)
        : undefined;
    if (barred) {
      ignore(barred);
    } else if (reading.kind === 'answer' && reading.answer.id === pending.id) {
      const annotation = run.metadata.annotations?.[APPROVAL_ANNOTATION] ?? '';
      const { user } = reading.answer;
      const before = observed.seenApproval;
      const remembered = before?.approvalId === pending.id && before.annotation === annotation && before.user === user;
      seen = remembered
        ? before
        : {
            approvalId: pending.id,
            annotation,
            ...(user !== undefined ? { user } : {}),
            at: now.toISOString(),
            ...(observed.answerQueued ? { beforeTimeout: true as const } : {}),
          };
      // Security #11.5: the agent refuses an approval whose sha256 is not the input's, and the
      // call stays pending; the timeout still holds for it (a second resume is a no-op otherwise).
      if (now.getTime() < timeoutAt) {
        actions.push({ type: 'resumeAgent', answer: reading.answer });
        return decided(Math.min(recheck, timeoutAt - now.getTime()));
      }
      // Past the timeout exactly one answer goes to the agent, or the two raced for the call:
      // the human's, when the operator saw it before the timeout and the agent would act on it
      // (its job, queued then, may not have run yet), else the timeout's deny. When the answer
      // was written is not recorded anywhere the operator can trust; when it first saw it is.
      // A new leader knows nothing of what the last one saw: an approve's resume job already
      // queued says the last one saw it in time (it queues one for nothing later). Only an
      // approve's job says so: a deny's id is the timeout's deny's too.
      const inTime = seen.beforeTimeout === true || Date.parse(seen.at) < timeoutAt;
      if (inTime && answerActsOn(reading.answer, pending.input)) {
        actions.push({ type: 'resumeAgent', answer: reading.answer });
        return decided(recheck);
      }
      if (
        !remembered &&
        observed.answerQueued === undefined &&
        reading.answer.decision === 'approve' &&
        answerActsOn(reading.answer, pending.input)
      )
        lookUp = reading.answer;
      if (!inTime)
        ignore(
          `Ignored the answer to approval ${pending.id}: the operator first saw it at ${seen.at}, after the wait for it ended at ` +
            `${new Date(timeoutAt).toISOString()}; the call is denied`,
        );
    } else if (reading.kind === 'answer' && !run.status?.approvals?.some((answered) => answered.id === reading.answer.id)) {
      // An answer to an approval already answered is the last one's, left in the annotation
      // (nothing clears it): not worth a Warning at every look while the next one waits.
      ignore(`Ignored an answer for approval ${reading.answer.id}: the pending one is ${pending.id}`);
    } else if (reading.kind === 'invalid') {
      ignore(reading.message);
    }
    if (now.getTime() >= timeoutAt) {
      actions.push({
        type: 'resumeAgent',
        answer: {
          id: pending.id,
          decision: 'deny',
          reason:
            waitEnd.by === 'timeout'
              ? `no answer within spec.approval.timeout (${spec.approval.timeout})`
              : `no answer before the run had waited for approvals ${durationText(maxApprovalWaitMs / 1000)} in all, ` +
                "the most the operator's maxApprovalWaitSeconds allows a run; later calls that need approval are denied at once",
          timedOut: true,
        },
      });
      return decided(recheck);
    }
    return decided(Math.min(recheck, timeoutAt - now.getTime()));
  }
  return done(builder.status.phase === 'Running' || builder.status.phase === 'WaitingForApproval' ? recheck : untilDeadline);
}
