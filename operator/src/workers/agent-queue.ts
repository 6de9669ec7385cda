// The BullMQ side of the agent: enqueueing jobs with idempotent ids, and the RunAgent port
// the controller calls (start a run, resume after an approval, stop and forget a run).
import type { Queue } from 'bullmq';
import type { CodingRun, ParsedCodingRun } from '../api/index.ts';
import type { ApprovalAnswer, RunAgent } from '../controller/run-agent.ts';
import { jobId, type AgentJobData, type AgentJobName } from './job-ids.ts';
import type { RunStateStore } from './run-state.ts';
import type { SandboxPool } from './sandbox-pool.ts';

export interface JobEnqueuer {
  step(ref: { uid: string; namespace: string; name: string }, completed: number): Promise<void>;
  finalize(ref: { uid: string; namespace: string; name: string }): Promise<void>;
}

const JOB_OPTIONS = {
  // Transport errors (a dropped exec, an API server restart) get a few tries; the job's
  // own logic decides when a run fails for good.
  attempts: 5,
  backoff: { type: 'exponential' as const, delay: 1000 },
  // Kept for a while so a repeated enqueue of the same id stays a no-op.
  removeOnComplete: { age: 3600 },
  removeOnFail: { age: 24 * 3600 },
};

export class AgentQueue implements RunAgent, JobEnqueuer {
  constructor(
    private readonly queue: Queue<AgentJobData, void, AgentJobName>,
    private readonly states: RunStateStore,
    private readonly sandboxes: SandboxPool,
  ) {}

  private add(name: AgentJobName, id: string, data: AgentJobData): Promise<unknown> {
    return this.queue.add(name, data, { ...JOB_OPTIONS, jobId: id });
  }

  private static ref(run: CodingRun) {
    return { uid: run.metadata.uid, namespace: run.metadata.namespace, name: run.metadata.name };
  }

  async start(run: ParsedCodingRun): Promise<void> {
    await this.add('prepare', jobId.prepare(run.metadata.uid), AgentQueue.ref(run));
  }

  async resume(run: CodingRun, answer: ApprovalAnswer): Promise<void> {
    await this.add('resume', jobId.resume(run.metadata.uid, answer.id), { ...AgentQueue.ref(run), approval: answer });
  }

  async step(ref: { uid: string; namespace: string; name: string }, completed: number): Promise<void> {
    await this.add('step', jobId.step(ref.uid, completed), { ...ref, step: completed });
  }

  async finalize(ref: { uid: string; namespace: string; name: string }): Promise<void> {
    await this.add('finalize', jobId.finalize(ref.uid), ref);
  }

  async stop(run: CodingRun): Promise<void> {
    const uid = run.metadata.uid;
    const state = await this.states.load(uid);
    const ids = [jobId.prepare(uid), jobId.finalize(uid)];
    for (let step = 0; step <= (state?.step ?? 0) + 1; step++) ids.push(jobId.step(uid, step));
    if (state?.pendingApproval) ids.push(jobId.resume(uid, state.pendingApproval.id));
    // A job that is running holds a lock and cannot be removed; it finds the run gone or
    // finished when it next reads it and stops there.
    await Promise.all(ids.map((id) => this.queue.remove(id).catch(() => 0)));
    await this.states.delete(uid);
    await this.sandboxes.release(uid);
  }
}
