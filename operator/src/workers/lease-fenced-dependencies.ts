// A job's dependencies fenced by its lease (job-lease.ts): every write to the run (its state in
// Redis, its next job, its status, its transcript) first checks that this worker still holds the
// job's lock, and throws the lease's JobLockLostError when it may not. A worker whose lock ran
// out while Redis was unreachable then stops before it writes anything more: another worker may
// be running the same job, and a save after that one's would undo what it (or the job after it)
// saved. Reads go through as they are. The jobs themselves need no change: run-agent-job.ts
// fences the dependencies it hands them.
import type { AgentDependencies } from './agent-dependencies.ts';
import type { JobEnqueuer } from './agent-queue.ts';
import type { RunStateStore } from './run-state.ts';
import type { RunStatusWriter } from './run-status-writer.ts';
import type { TranscriptWriter } from './transcript-writer.ts';

export function fencedByLease(deps: AgentDependencies, lease: AbortSignal): AgentDependencies {
  /** The write, once the lease is checked: a write already sent is not called back. */
  const fenced =
    <A extends unknown[], R>(write: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      lease.throwIfAborted();
      return write(...args);
    };
  const { states, queue, status, transcript } = deps;
  // The store and the status writer are classes: a view of each whose writes are fenced, and
  // whose other methods are the object's own (inherited through the prototype).
  const fencedStates: RunStateStore = Object.assign(Object.create(states) as RunStateStore, {
    save: fenced(states.save.bind(states)),
    create: fenced(states.create.bind(states)),
    claimAnswer: fenced(states.claimAnswer.bind(states)),
    delete: fenced(states.delete.bind(states)),
  } satisfies Partial<RunStateStore>);
  const fencedStatus: RunStatusWriter = Object.assign(Object.create(status) as RunStatusWriter, {
    write: fenced(status.write.bind(status)),
    progress: fenced(status.progress.bind(status)),
  } satisfies Partial<RunStatusWriter>);
  const fencedQueue: JobEnqueuer = {
    step: fenced(queue.step.bind(queue)),
    finalize: fenced(queue.finalize.bind(queue)),
    publish: fenced(queue.publish.bind(queue)),
  };
  const fencedTranscript: TranscriptWriter = { append: fenced(transcript.append.bind(transcript)) };
  return { ...deps, states: fencedStates, status: fencedStatus, queue: fencedQueue, transcript: fencedTranscript };
}
