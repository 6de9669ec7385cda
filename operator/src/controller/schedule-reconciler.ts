// Reconciles one CodingSchedule: reads it, its template and its runs from the API server,
// asks decideSchedule what to do, and applies that in one place: delete the runs it names,
// create the run for the due time, then write the status and record the Events. The order
// is what makes a crash safe: the run exists before lastScheduleTime says so, and a run made
// by an attempt that died before its status write is found again by its name for the time
// (names.ts scheduledRunName); a create sent again for that time is refused AlreadyExists.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { codingScheduleSpec, SCHEDULE_ACTIVE_LISTED, type CodingSchedule, type CodingScheduleStatus } from '../api/coding-schedule.ts';
import type { CodingRunTemplate } from '../api/coding-run-template.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { RunEvent } from '../reconcile/decision.ts';
import { SCHEDULE_RUN_PAGE_LIMIT, type CreateRunAnswer, type ScheduleGateway } from '../kube/schedule-gateway.ts';
import { goneUnlessSame } from '../kube/kube-gateway.ts';
import { apiRefusal, isTooLargeToStore, statusCodeOf } from '../kube/api-errors.ts';
import { parseCronSchedule } from '../reconcile/cron-schedule.ts';
import { decideSchedule, isRecheckedProblem, type ScheduledRun, type ScheduleProblem } from '../reconcile/decide-schedule.ts';
import { specIssuesMessage } from '../reconcile/spec-issues.ts';
import { resolveScheduledRunSpec, scheduledRunAt, scheduledRunObject } from '../reconcile/scheduled-run.ts';
import { isScheduleRun } from '../reconcile/runs-of-schedule.ts';
import type { ControllerLogger } from './run-controller.ts';
import { listRunsOfSchedule } from './schedule-runs-listing.ts';
import { WriteGate } from './write-gate.ts';

export interface ScheduleReconcilerDeps {
  kube: ScheduleGateway;
  events: Pick<EventRecorder, 'record'>;
  logger: ControllerLogger;
  /** The clock every decision is made with; tests drive it. */
  now: () => Date;
  /** Runs per page of a schedule's list of runs: SCHEDULE_RUN_PAGE_LIMIT; tests make it small. */
  runPageLimit?: number;
  /** The most of a schedule's runs a reconcile keeps: SCHEDULE_RUNS_KEPT; tests make it small. */
  runsKept?: number;
}

/**
 * Stands in for a spec the operator cannot parse (a CRD installed without its schema, or
 * edited by hand): the status still lists the runs and says why, nothing is created, and the
 * widest history limits delete as little as possible.
 */
const UNREADABLE_SPEC = codingScheduleSpec.parse({
  schedule: '@yearly',
  suspend: true,
  templateRef: { name: 'unreadable' },
  successfulRunsHistoryLimit: 100,
  failedRunsHistoryLimit: 100,
});

/** A daily schedule would otherwise set a timer for a day; look again at least this often. */
export const MAX_SCHEDULE_REQUEUE_MS = 60 * 60 * 1000;
/** After the API server refused the run due: try again this often (a quota may free up, a policy or template be fixed). */
export const RUN_REFUSED_RETRY_MS = 60_000;

export class ScheduleReconciler {
  /**
   * Closed by stop(): no write is sent after it (write-gate.ts). A reconcile whose list of runs
   * came back after the lease was lost would delete runs and write status beside the new leader,
   * from what it listed before.
   */
  private readonly writes = new WriteGate();
  /**
   * Per schedule (namespace/name), the problem its last reconcile found and how many reconciles
   * in a row found it before: a template problem is looked at again less often the longer it
   * stays (decide-schedule.ts templateRecheckMs). In memory only: a restarted operator, or a new
   * leader, starts again from 30 s.
   */
  private readonly repeatedProblems = new Map<string, { problem: string; repeats: number }>();

  constructor(private readonly deps: ScheduleReconcilerDeps) {}

  /**
   * A schedule deleted: its repeat count goes with it. A deleted schedule is not queued, and an
   * entry only its own reconcile would remove was kept for each one made and deleted in a loop.
   */
  forget(key: string): void {
    this.repeatedProblems.delete(key);
  }

  /** How many schedules' repeat counts are kept: memory a namespace's writers could grow. */
  get problemsKept(): number {
    return this.repeatedProblems.size;
  }

  /** No reconcile writes anything after this, the ones in flight included; what they had sent stays sent. */
  stop(): void {
    this.writes.close();
  }

  private beforeWrite(): void {
    this.writes.check();
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number }> {
    return this.writes.unlessStopped(
      () => this.reconcileOnce(key),
      () => {
        const [namespace, name] = key.split('/');
        this.deps.logger.info({ namespace, name }, 'schedule reconcile stopped before its next write: this replica no longer leads');
        return {};
      },
    );
  }

  private async reconcileOnce(key: string): Promise<{ requeueAfterMs?: number }> {
    const [namespace, name] = key.split('/') as [string, string];
    const { kube, logger } = this.deps;
    const schedule = await kube.getSchedule(namespace, name);
    if (!schedule || schedule.metadata.deletionTimestamp) {
      this.repeatedProblems.delete(key);
      return {};
    }
    // Every write goes through these: none is sent once the reconciler was stopped.
    const record = (event: RunEvent) => {
      this.beforeWrite();
      return this.deps.events.record(schedule, event);
    };
    const writeStatus = (status: CodingScheduleStatus) => {
      this.beforeWrite();
      return kube.replaceScheduleStatus(schedule, status);
    };
    const now = this.deps.now();

    const parsedSpec = codingScheduleSpec.safeParse(schedule.spec);
    let problem: ScheduleProblem | undefined;
    let cron;
    if (!parsedSpec.success) {
      problem = { reason: 'InvalidSchedule', message: specIssuesMessage('', parsedSpec.error.issues) };
    } else {
      const parsedCron = parseCronSchedule(parsedSpec.data.schedule, parsedSpec.data.timeZone);
      if (parsedCron.ok) cron = parsedCron.schedule;
      else problem = { reason: 'InvalidSchedule', message: parsedCron.message };
    }
    const spec = parsedSpec.success ? parsedSpec.data : UNREADABLE_SPEC;
    let runSpec;
    let template;
    if (!problem) {
      template = spec.templateRef ? await kube.getTemplate(namespace, spec.templateRef.name) : undefined;
      const resolved = resolveScheduledRunSpec(spec, template);
      if (resolved.ok) runSpec = resolved.spec;
      else problem = resolved.problem;
    }

    // Its own runs: under the name it gives each time and controlled by it (runs-of-schedule.ts).
    // A foreign one (an earlier operator's generated name) is under its concurrency policy only.
    const making = { spec, ...(runSpec ? { runSpec } : {}), ...(template ? { template } : {}) };
    // Listed a page at a time and kept slim (schedule-runs-listing.ts): anyone who may create
    // runs can label big ones for the schedule, and each of their phase changes wakes it.
    const listed = await listRunsOfSchedule({
      kube,
      schedule,
      making,
      now,
      pageLimit: this.deps.runPageLimit ?? SCHEDULE_RUN_PAGE_LIMIT,
      ...(this.deps.runsKept !== undefined ? { keep: this.deps.runsKept } : {}),
    });
    if (listed.leftOut > 0) {
      logger.warn(
        { namespace, name, leftOut: listed.leftOut, kept: listed.runs.length + listed.foreign.length },
        'schedule has more runs than a reconcile keeps: the oldest are left out until history deletes the newer',
      );
    }
    // Each run is deleted as listed, by its uid: one deleted and made again under its name since
    // (by a person, by GitOps) is not the schedule's to delete.
    const { uids } = listed;
    const input = {
      spec,
      status: schedule.status,
      generation: schedule.metadata.generation ?? 0,
      createdAt: new Date(schedule.metadata.creationTimestamp ?? now.toISOString()),
      cron,
      runs: listed.runs,
      foreign: listed.foreign,
      now,
    };
    // The runs just deleted, as a decision made again after the create must see them: gone from the status.
    const afterDeletes = (deleteRuns: ReadonlyArray<{ name: string }>) => {
      const deleted = new Set(deleteRuns.map((run) => run.name));
      const mark = (run: ScheduledRun) => (deleted.has(run.name) ? { ...run, deleting: true } : run);
      return { runs: input.runs.map(mark), foreign: input.foreign.map(mark) };
    };
    const problemRepeats = this.countRepeats(key, schedule, problem, template);
    const decision = decideSchedule({ ...input, ...(problem ? { problem, problemRepeats } : {}) });

    // Every deletion before the create, history's too: they only touch runs Replace ends or
    // finished ones, and a quota on CodingRuns that refuses the create is freed by them. After
    // the create, a refused create never reached them, and the schedule stayed stuck.
    for (const { name: runName } of decision.deleteRuns) {
      this.beforeWrite();
      await goneUnlessSame(kube.deleteRun(namespace, runName, uids.get(runName)!));
    }
    let status: CodingScheduleStatus = decision.status;
    if (decision.create && runSpec) {
      const manifest = scheduledRunObject(schedule, spec, runSpec, decision.create, template);
      let answer: CreateRunAnswer;
      this.beforeWrite();
      try {
        answer = await kube.createRun(manifest);
      } catch (error) {
        const byServer = apiRefusal(error);
        const refusal = byServer ? { ...byServer, fix: REFUSAL_FIX } : tooLargeRefusal(error);
        if (!refusal) throw error;
        // Said in status (Ready False, RunRefused) and once as an Event, not thrown: a refusal
        // retried as an error said nothing in status and recorded a Warning at every retry.
        // The run is not recorded as scheduled; it is tried again, under the same name, so the
        // same refusal reads the same and leaves the status and the Events as they are.
        const message =
          `The API server refused the run due at ${decision.create.toISOString()}: ${refusal.message}. ` +
          `${refusal.fix}; the schedule tries again every minute.`;
        // The runs just deleted are gone from the status, and the Events that say so are kept.
        const refused = decideSchedule({ ...input, ...afterDeletes(decision.deleteRuns), problem: { reason: 'RunRefused', message } });
        if (!sameStatus(refused.status, schedule.status)) await writeStatus(refused.status);
        for (const event of [...decision.events.filter((event) => event.reason === 'RunReplaced'), ...refused.events]) await record(event);
        return { requeueAfterMs: RUN_REFUSED_RETRY_MS };
      }
      if ('taken' in answer) {
        // The name of the time is held: by the schedule's own run (a create whose answer was
        // lost, sent again) or by another's, which takes the time (ForeignRun), never adopted.
        const holder = answer.taken;
        if (!holder) throw new Error(`run ${manifest.metadata.name} held its name at the create and was gone when read: trying again`);
        const held = scheduledRunAt(holder, decision.create);
        const ours = isScheduleRun(holder, schedule, making);
        const left = afterDeletes(decision.deleteRuns);
        const found = decideSchedule({
          ...input,
          runs: ours ? [...left.runs, held] : left.runs,
          foreign: ours ? left.foreign : [...left.foreign, held],
        });
        logger.info(
          { namespace, name, run: holder.metadata.name, scheduledTime: decision.create.toISOString(), ours },
          ours ? 'schedule found its run for the time already made' : 'another run holds the name of the time due',
        );
        if (!sameStatus(found.status, schedule.status)) await writeStatus(found.status);
        for (const event of [...decision.events.filter((event) => event.reason === 'RunReplaced'), ...found.events]) await record(event);
        return requeueOf(found.requeueAfterMs);
      }
      const created = answer.created;
      status = withCreatedRun(status, created.metadata.name, decision.create);
      await record({
        type: 'Normal',
        reason: 'RunCreated',
        message: `Created run ${created.metadata.name} for ${decision.create.toISOString()}`,
      });
      logger.info({ namespace, name, run: created.metadata.name, scheduledTime: decision.create.toISOString() }, 'schedule created a run');
    }
    if (!sameStatus(status, schedule.status)) await writeStatus(status);
    for (const event of decision.events) await record(event);
    return requeueOf(decision.requeueAfterMs);
  }

  /**
   * How many reconciles in a row before this one found the same problem: the same reason and
   * message, for the same schedule object, spec and template version. Any change starts again
   * from 0: an edit of the schedule (which wakes it at once), the template created, edited or
   * deleted (which nothing watches: the wait, at most TEMPLATE_RECHECK_MAX_MS, bounds how late
   * the schedule sees it).
   */
  private countRepeats(
    key: string,
    schedule: CodingSchedule,
    problem: ScheduleProblem | undefined,
    template: CodingRunTemplate | undefined,
  ): number {
    // Only problems looked at again are counted: any other is never requeued, so its entry
    // would stay until the schedule's next reconcile, which a deleted one never has.
    if (!problem || !isRecheckedProblem(problem.reason)) {
      this.repeatedProblems.delete(key);
      return 0;
    }
    // A digest, not the message (up to some 4 000 characters a schedule's writer chooses).
    const seen = sha256Of([
      schedule.metadata.uid,
      schedule.metadata.generation,
      problem.reason,
      problem.message,
      template?.metadata.uid,
      template?.metadata.resourceVersion,
    ]);
    const previous = this.repeatedProblems.get(key);
    const repeats = previous?.problem === seen ? previous.repeats + 1 : 0;
    this.repeatedProblems.set(key, { problem: seen, repeats });
    return repeats;
  }
}

const sha256Of = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex');

const requeueOf = (requeueAfterMs: number | undefined) =>
  requeueAfterMs === undefined ? {} : { requeueAfterMs: Math.min(requeueAfterMs, MAX_SCHEDULE_REQUEUE_MS) };

const REFUSAL_FIX = 'Fix the run template, or the quota or policy that refused it';

/**
 * The API server's refusal of the run, as apiRefusal reads one, and what to change. Too large
 * to store (etcd's 500 "request is too large", or 413) is one too: sent again unchanged it is
 * refused again, and thrown it was retried with no word in status and no Event.
 */
function tooLargeRefusal(error: unknown): { code: number; message: string; fix: string } | undefined {
  if (!isTooLargeToStore(error)) return undefined;
  const code = statusCodeOf(error)!;
  return {
    code,
    message: `the run is too large to store (HTTP ${code}${code === 500 ? ': etcd refused it as too large' : ''})`,
    fix: "Shorten the run's spec.sandbox.env, spec.task or spec.instructions (in the template or in spec.runTemplate), or the labels and annotations of spec.runTemplate.metadata",
  };
}

/**
 * Whether the status to write is the one the schedule has: by value, not by its JSON, whose
 * keys the API server sorts, so every reconcile wrote an unchanged status again.
 */
function sameStatus(status: CodingScheduleStatus, current: CodingScheduleStatus | undefined): boolean {
  return isDeepStrictEqual(status, current ?? {});
}

function withCreatedRun(status: CodingScheduleStatus, name: string, scheduledTime: Date): CodingScheduleStatus {
  const active = [...(status.active ?? []), { name, scheduledTime: scheduledTime.toISOString().replace(/\.\d{3}Z$/, 'Z') }];
  return { ...status, active: active.slice(-SCHEDULE_ACTIVE_LISTED), activeCount: (status.activeCount ?? active.length - 1) + 1 };
}
