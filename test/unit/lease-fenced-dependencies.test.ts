// A job whose lease ended (job-lease.ts: its BullMQ lock may be another worker's now) writes
// nothing more to its run: not the state, not the next job, not the status or the transcript;
// and runAgentJob decides nothing about the run after it (no failing it, no finalizing it).
import { describe, expect, it } from 'vitest';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { JobLockLostError } from '../../operator/src/workers/errors/job-lock-lost-error.ts';
import { fencedByLease } from '../../operator/src/workers/lease-fenced-dependencies.ts';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';

const ref = { uid: 'uid-1', namespace: 'ns', name: 'r' };

/** Dependencies whose every write is recorded; the state store also keeps the one state it holds. */
function recordingDeps(state: RunState | undefined) {
  const written: string[] = [];
  const logged: string[] = [];
  const logger = {
    info: () => undefined,
    warn: (_fields: object, message: string) => void logged.push(message),
    error: () => undefined,
    child: () => logger,
  };
  // The store is a class whose methods use its own fields: the fenced view must keep them working.
  const states = {
    held: state,
    async load() {
      return this.held;
    },
    async save(saved: RunState) {
      written.push(`save ${saved.stage}`);
      this.held = saved;
    },
    async create() {
      written.push('create');
      return true;
    },
    async claimAnswer() {
      written.push('claimAnswer');
      return true;
    },
    async delete() {
      written.push('delete');
    },
  };
  const deps = {
    states,
    status: {
      async write() {
        written.push('status write');
        return { written: false, why: 'gone' };
      },
      async progress() {
        written.push('status progress');
        return undefined;
      },
    },
    queue: {
      step: async () => void written.push('enqueue step'),
      finalize: async () => void written.push('enqueue finalize'),
      publish: async () => void written.push('enqueue publish'),
    },
    transcript: { append: async () => void written.push('transcript') },
    sandboxes: { release: async () => undefined },
    metrics: { execErrors: { inc: () => undefined } },
    getRun: async () => undefined,
    logger,
    now: () => new Date(),
  } as unknown as AgentDependencies;
  return { deps, written, logged };
}

function endedLease(): AbortSignal {
  const controller = new AbortController();
  controller.abort(new JobLockLostError('uid-1-step-0', 'Redis would not renew it'));
  return controller.signal;
}

describe('dependencies fenced by a lease', () => {
  const writes = (deps: AgentDependencies, state: RunState) => [
    () => deps.states.save(state),
    () => deps.states.create(state),
    () => deps.states.claimAnswer(ref.uid, 'approval-1', 'approve'),
    () => deps.states.delete(ref),
    () => deps.queue.step(ref, 1),
    () => deps.queue.finalize(ref),
    () => deps.queue.publish(ref),
    () => deps.status.write(ref.namespace, ref.name, ref.uid, (status) => status),
    () => deps.status.progress(ref.namespace, ref.name, ref.uid, { steps: 1, toolCalls: 0, usage: {} }),
    () => deps.transcript.append({ metadata: { ...ref } }, []),
  ];

  it('refuse every write to the run once the lease ended, with its JobLockLostError', async () => {
    const state = startingState(ref, 0);
    const { deps, written } = recordingDeps(state);
    const fenced = fencedByLease(deps, endedLease());
    for (const write of writes(fenced, state)) {
      const error = await write().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(JobLockLostError.isInstance(error)).toBe(true);
    }
    expect(written).toEqual([]);
    // Reads go on: the store's own methods, on its own fields.
    expect(await fenced.states.load(ref)).toBe(state);
  });

  it('pass every write through while the lease holds', async () => {
    const state = startingState(ref, 0);
    const { deps, written } = recordingDeps(state);
    const fenced = fencedByLease(deps, new AbortController().signal);
    for (const write of writes(fenced, state)) await write();
    expect(written).toEqual([
      'save stepping',
      'create',
      'claimAnswer',
      'delete',
      'enqueue step',
      'enqueue finalize',
      'enqueue publish',
      'status write',
      'status progress',
      'transcript',
    ]);
  });
});

describe('runAgentJob with a lease', () => {
  // A finalize that finds no state fails the run StateLost (a status write, the state forgotten).
  const finalize = { name: 'finalize' as const, data: ref, attempt: 1, attempts: 10 };

  it('ends an attempt whose lease ended with the lease’s error, and fails nothing', async () => {
    const { deps, written, logged } = recordingDeps(undefined);
    const lease = endedLease();
    await expect(runAgentJob({ ...deps, lease }, finalize)).rejects.toBe(lease.reason);
    expect(written).toEqual([]);
    expect(logged).toEqual(['job lock lost: the attempt ended without writing']);
  });

  it('applies what the job threw as before while the lease holds', async () => {
    const { deps, written } = recordingDeps(undefined);
    await runAgentJob({ ...deps, lease: new AbortController().signal }, finalize);
    expect(written).toEqual(['status write', 'delete']);
  });
});
