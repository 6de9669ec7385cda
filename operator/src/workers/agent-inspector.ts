// What the agent holds of a started run, for the controller (its agentLoss check): the run's
// state in Redis and whether a job is there to move it on, read without acting on anything.
// A state that does not verify (Security #11.1) is reported as invalid, never trusted.
// A run seen moving a moment ago is not looked at again (agent-sightings.ts).
import { answerWithin } from './answer-within.ts';
import type { Queue } from 'bullmq';
import type { CodingRun } from '../api/index.ts';
import type { AgentView } from '../reconcile/run-agent.ts';
import { readApprovalAnnotation } from '../reconcile/approval-answer.ts';
import { AgentSightings } from './agent-sightings.ts';
import { jobId, type AgentJobData, type AgentJobName } from './job-ids.ts';
import { runRefOf } from './run-ref.ts';
import type { RunState, RunStateStore } from './run-state.ts';

/** Job states in which a job will still run (or is running). */
const LIVE_JOB_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);
/** inspect() gives up after this long (Redis down): the controller must not hang on it. */
const INSPECT_TIMEOUT_MS = 3_000;

/**
 * The job that moves a run on from where its state is, as handOn (hand-on.ts) enqueues it:
 * the step after the last one completed, or the one in flight (its number already counted),
 * finalize, publish. None for a run waiting on a human, or one whose state is gone.
 */
export function expectedJob(uid: string, state: RunState | undefined): string | undefined {
  switch (state?.stage) {
    case 'preparing':
      return jobId.prepare(uid);
    case 'stepping':
      return jobId.step(uid, state.inFlight ? Math.max(0, state.step - 1) : state.step);
    case 'finalizing':
      return jobId.finalize(uid, state.verification?.attempts);
    case 'publishing':
      return jobId.publish(uid);
    default:
      return undefined;
  }
}

export class AgentInspector {
  constructor(
    private readonly queue: Queue<AgentJobData, void, AgentJobName>,
    private readonly states: RunStateStore,
    private readonly sightings = new AgentSightings(),
  ) {}

  async inspect(run: CodingRun): Promise<AgentView | undefined> {
    const uid = run.metadata.uid;
    const recent = this.sightings.recent(uid);
    if (recent) return recent;
    const view = await this.lookInTime(run);
    this.sightings.note(uid, view);
    return view;
  }

  /** undefined when Redis does not answer in time, or fails: the controller cannot tell. */
  private lookInTime(run: CodingRun): Promise<AgentView | undefined> {
    return answerWithin(this.look(run), INSPECT_TIMEOUT_MS, 'inspecting the agent').catch(() => undefined);
  }

  /**
   * The state, then the jobs that could move the run on, then the state again. Every job
   * saves the state before it enqueues the next one and stays active until it has, so a
   * healthy run always shows a live job or a state that changed between the two reads.
   * A live job whose id the state gives is enough, and the one the state expects is looked
   * up first, alone: the other ids, the active jobs and the second read are only looked at
   * without it. That is the common case (a run whose next job waits in a busy queue is
   * rechecked every AGENT_RECHECK_MS), and the stage of a moving run decides nothing
   * (agentLoss).
   */
  private async look(run: CodingRun): Promise<AgentView> {
    const uid = run.metadata.uid;
    const before = await this.states.loadText(uid);
    // A state that does not verify is as good as missing; the controller fails the run with why.
    const { state, invalid } = this.states.inspect(before, runRefOf(run));
    const step = state?.step ?? run.status?.steps ?? 0;
    const rounds = state?.verification?.attempts ?? 0;
    const ids = new Set([
      jobId.prepare(uid),
      jobId.finalize(uid),
      jobId.publish(uid),
      jobId.finalize(uid, rounds),
      // The finalize that saved this round's verification, waiting to retry what failed after it.
      ...(rounds > 0 ? [jobId.finalize(uid, rounds - 1)] : []),
      jobId.step(uid, Math.max(0, step - 1)),
      jobId.step(uid, step),
      jobId.step(uid, step + 1),
    ]);
    const approvals = [state?.pendingApproval?.id, run.status?.pendingApproval?.id];
    const reading = readApprovalAnnotation(run);
    if (reading.kind === 'answer') approvals.push(reading.answer.id);
    if (reading.kind === 'answer' && reading.answer.decision === 'approve')
      ids.add(jobId.resume(uid, reading.answer.id, { sha256: reading.answer.sha256 }));
    for (const approval of approvals) if (approval) ids.add(jobId.resume(uid, approval));
    const lookUp = async (id: string) => ({ id, state: await this.queue.getJobState(id) });
    const live = (looked: { state: string }[]) => looked.some(({ state: jobState }) => LIVE_JOB_STATES.has(jobState));
    const movingByJob: AgentView = { state: state?.stage ?? 'missing', moving: true };
    // The job the state says moves the run on, alone first: for a run whose next job waits, the one lookup needed.
    const expected = expectedJob(uid, state);
    const first = expected === undefined ? [] : [await lookUp(expected)];
    if (live(first)) return movingByJob;
    // Its state is kept (a failed one is reported below), and it is not looked up twice.
    const states = [...first, ...(await Promise.all([...ids].filter((id) => id !== expected).map(lookUp)))];
    if (live(states)) return movingByJob;
    // An active job's id may not be derivable (a resume answered by timeout); active jobs are few.
    const active = await this.queue.getActive();
    const moving = active.some((job) => (job.data as { uid?: string } | undefined)?.uid === uid);
    const after = await this.states.loadText(uid);
    if (moving || after !== before) {
      const now = after === before ? state : this.states.peek(after, runRefOf(run));
      return { state: now?.stage ?? 'missing', moving: true };
    }
    const failed = states.find(({ state: jobState }) => jobState === 'failed');
    const failedReason = failed ? (await this.queue.getJob(failed.id))?.failedReason : undefined;
    return {
      state: state?.stage ?? 'missing',
      moving: false,
      ...(failedReason !== undefined ? { failedJob: failedReason } : {}),
      ...(invalid !== undefined ? { invalidState: invalid } : {}),
    };
  }
}
