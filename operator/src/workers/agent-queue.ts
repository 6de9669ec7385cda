// The BullMQ side of the agent: enqueueing jobs with idempotent ids, signed (Security #11.1),
// for the controller (start a run, resume after an approval, stop and forget a run) and for
// the jobs (the next step, finalize). What the agent holds of a run is read by
// agent-inspector.ts; agent-runtime.ts joins the two into the controller's RunAgent port.
import type { Queue } from 'bullmq';
import type { CodingRun, ParsedCodingRun } from '../api/index.ts';
import type { ApprovalAnswer, RunAgent } from '../reconcile/run-agent.ts';
import { jobId, type AgentJobData, type AgentJobName } from './job-ids.ts';
import { JOB_ATTEMPTS, JOB_BACKOFF_TYPE } from './job-retry.ts';
import { runRefOf } from './run-ref.ts';
import type { RunStateStore } from './run-state.ts';
import { jobFields, type RunStateSeal, type SignedJobData } from './run-state-seal.ts';
import type { RedisClient } from './redis-connection.ts';
import type { RunJobIndex } from './run-job-index.ts';
import type { SandboxPool } from './sandbox-pool.ts';

export interface JobEnqueuer {
  /** completed: steps the run's saved state has counted already; older completed step jobs go (STEPS_KEPT_BEHIND). */
  step(ref: { uid: string; namespace: string; name: string }, completed: number): Promise<void>;
  /** round: the verifications already run (RunState.verification.attempts), 0 or absent before the first. */
  finalize(ref: { uid: string; namespace: string; name: string }, round?: number): Promise<void>;
  publish(ref: { uid: string; namespace: string; name: string }): Promise<void>;
}

const JOB_OPTIONS = {
  // Transport errors (a dropped exec, an API server restart) are retried (job-retry.ts);
  // the job's own logic decides when a run fails for good.
  attempts: JOB_ATTEMPTS,
  backoff: { type: JOB_BACKOFF_TYPE },
  // Kept for a while so a repeated enqueue of the same id stays a no-op. A run's step jobs
  // are many and go sooner (STEPS_KEPT_BEHIND).
  removeOnComplete: { age: 3600 },
  removeOnFail: { age: 24 * 3600 },
};

/**
 * A run that has started goes on before a new run starts: its step, resume and finalize
 * jobs carry no priority, which BullMQ serves before any prioritized job, and a prepare
 * (the start of a run) is prioritized. Served first-in-first-out instead, a burst of N runs
 * prepared all N before any took its first step: N sandbox sessions open at once (about
 * 120 KiB each in the operator, a toolbox process each in the pods), every run finishing
 * only at the very end, and every run's budget.timeout running meanwhile. Prepares keep
 * their creation order among themselves.
 */
const PREPARE_PRIORITY = 1;

/**
 * Completed step jobs of a run kept behind the step being queued: queueing step n drops the
 * completed job of step n - 2. Kept for the hour like the other kinds, a run's steps (up to
 * maxSteps, 1000) held about 1.6 KB each in Redis, in no namespace's tally: 100 fast runs,
 * 160 MB of the bundled Redis. A step's id need not outlive that for its enqueue to stay
 * idempotent: a step job that comes late finds the saved state's step count past its own and
 * only hands the run on (step-job.ts), except the job of the step just before the count while
 * that step's calls are in flight: it finishes them. They are in flight again after an
 * approval, while the resume runs them, so that step's job is kept and a late enqueue of it
 * stays a no-op. Step n is queued only once the state has counted n steps, and it never
 * counts fewer: step n - 2 can no longer be that one.
 */
const STEPS_KEPT_BEHIND = 2;

/** The resume job's id for an answer: an approve's names its digest too (job-ids.ts). */
function resumeJobId(run: CodingRun, answer: ApprovalAnswer): string {
  const approve = answer.decision === 'approve' ? { sha256: answer.sha256 } : undefined;
  return jobId.resume(run.metadata.uid, answer.id, approve);
}

export class AgentQueue implements Omit<RunAgent, 'inspect' | 'keepDiff'>, JobEnqueuer {
  constructor(
    private readonly queue: Queue<AgentJobData, void, AgentJobName>,
    private readonly states: RunStateStore,
    private readonly sandboxes: SandboxPool,
    /** Security #11.1: every job's data carries a MAC the worker verifies (a forged job, an approval above all, is refused). */
    private readonly seal: RunStateSeal,
    /** The queue's Redis, where stop() looks for a run's jobs. */
    private readonly redis: RedisClient,
    /** The ids of each run's jobs that stop() cannot derive. */
    private readonly jobs: RunJobIndex,
  ) {}

  private add(name: AgentJobName, id: string, data: AgentJobData): Promise<unknown> {
    const mac = this.seal.signJob(jobFields(name, data));
    const signed: AgentJobData & SignedJobData = { ...data, mac };
    const queued = this.queue.add(name, signed, {
      ...JOB_OPTIONS,
      jobId: id,
      ...(name === 'prepare' ? { priority: PREPARE_PRIORITY } : {}),
    });
    // A step's id is its number, which stop() derives from the run; any other job is listed,
    // beside its enqueue (no round trip more). A listing that fails fails the caller, whose
    // retry lists it again (the add is idempotent). Steps are not listed: four more commands
    // on every step's hand-over cost its overhead about 2 ms p50 (docs/benchmarks.md).
    return name === 'step' ? queued : Promise.all([this.jobs.note(data.uid, id), queued]);
  }

  async start(run: ParsedCodingRun, podName: string): Promise<void> {
    await this.add('prepare', jobId.prepare(run.metadata.uid), { ...runRefOf(run), podName });
  }

  async resume(run: CodingRun, answer: ApprovalAnswer): Promise<void> {
    await this.add('resume', resumeJobId(run, answer), { ...runRefOf(run), approval: answer });
  }

  /** Whether resume() queued the answer: its job, by its deterministic id, in any state. */
  async answerQueued(run: CodingRun, answer: ApprovalAnswer): Promise<boolean> {
    return (await this.queue.getJob(resumeJobId(run, answer))) !== undefined;
  }

  async step(ref: { uid: string; namespace: string; name: string }, completed: number): Promise<void> {
    // Beside the add: the hand-over waits for no round trip more.
    await Promise.all([
      this.add('step', jobId.step(ref.uid, completed), { ...ref, step: completed }),
      this.dropCompletedStep(ref.uid, completed - STEPS_KEPT_BEHIND),
    ]);
  }

  /**
   * Removes step `step`'s job if it completed. Not one that waits (stale, which the state refuses
   * anyway), nor one that failed (kept a day to be looked at). A job still finishing is locked
   * and stays for the hour; so does one whose removal fails: the next step's add is what
   * matters, and this never fails it.
   */
  private async dropCompletedStep(uid: string, step: number): Promise<void> {
    if (step < 0) return;
    const id = jobId.step(uid, step);
    try {
      if ((await this.redis.zscore(this.queue.toKey('completed'), id)) !== null) await this.queue.remove(id);
    } catch {
      // Kept for the hour, as before STEPS_KEPT_BEHIND.
    }
  }

  async finalize(ref: { uid: string; namespace: string; name: string }, round = 0): Promise<void> {
    await this.add('finalize', jobId.finalize(ref.uid, round), ref);
  }

  async publish(ref: { uid: string; namespace: string; name: string }): Promise<void> {
    await this.add('publish', jobId.publish(ref.uid), ref);
  }

  async stop(run: CodingRun): Promise<number> {
    const uid = run.metadata.uid;
    // A state that cannot be trusted is not read for job ids: the ids below are removed anyway.
    const state = this.states.peek(await this.states.loadText(uid), runRefOf(run));
    const ids = new Set([jobId.prepare(uid), jobId.finalize(uid), jobId.finalize(uid, state?.verification?.attempts), jobId.publish(uid)]);
    // The steps: as many as the state says (a run in flight), or as its status does once the
    // state is gone (a finished run's terminal write carries its last step), and the next one.
    const steps = Math.max(state?.step ?? 0, run.status?.steps ?? 0);
    for (let step = 0; step <= steps + 1; step++) ids.add(jobId.step(uid, step));
    if (state?.pendingApproval) ids.add(jobId.resume(uid, state.pendingApproval.id));
    // Every other job the run had (its resumes, named after their approvals; finalize rounds),
    // as its index lists them. Only ids of this run's jobs: Redis is not trusted, and an id
    // written into the set stops nothing of another run's (security #11.1).
    const listed = (await this.jobs.list(uid)).filter((id) => id.startsWith(`${uid}-`));
    for (const id of listed) ids.add(id);
    // Looked for first, all in one round trip (a job is a hash under its id): a finished run is
    // stopped two or three times (its end, its pod's deletion, its own), and each of BullMQ's
    // removes is a script of ten commands or more, even for a job that is long gone.
    const candidates = [...ids];
    const found = (await this.redis.pipeline(candidates.map((id) => ['exists', this.queue.toKey(id)])).exec()) ?? [];
    const present = candidates.filter((_id, index) => found[index]?.[1] !== 0);
    // A job that is running holds a lock and cannot be removed; it finds the run gone or
    // finished when it next reads it and stops there. Counted, so a deletion waits for it.
    const removed = await Promise.all(present.map((id) => this.queue.remove(id).catch(() => 0)));
    await this.states.delete(runRefOf(run));
    await this.sandboxes.release(uid);
    const left = await Promise.all(
      present.map(async (id, index) => removed[index] === 0 && (await this.queue.getJobState(id)) !== 'unknown'),
    );
    const running = new Set(present.filter((_id, index) => left[index]));
    // A deleted run is stopped until none of its jobs runs: what is gone comes off its list.
    // With nothing left, the list goes.
    if (running.size === 0) await this.jobs.forget(uid);
    else
      await this.jobs.drop(
        uid,
        listed.filter((id) => !running.has(id)),
      );
    return running.size;
  }
}
