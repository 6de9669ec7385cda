// failRun (workers/fail-run.ts) for a job that found no state for a run with a cancel requested.
// The controller's cancel stop removes the run's jobs, deletes its state, then writes Cancelled:
// a job queued after a save, or put off and run again after the stop, finds no state. It must
// leave the ending to the controller (Cancelled), not write Failed/StateLost over it, and still
// drop what the agent holds of the run.
import { describe, expect, it } from 'vitest';
import { FAILURE_MESSAGES } from '../../operator/src/api/failure-messages.ts';
import { REASONS, type CodingRun, type CodingRunStatus } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { failRun } from '../../operator/src/workers/fail-run.ts';

const ref = { namespace: 'ns', name: 'r', uid: 'uid-1' };

/** A Running run (with `annotations`) whose state is gone, and what failRun did to it. */
function stateGone(annotations?: Record<string, string>) {
  const run = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, ...(annotations ? { annotations } : {}) },
    spec: {
      task: 'Fix it',
      repository: { url: 'https://example.com/repo.git', credentialsSecretRef: { name: 'git', key: 'token' } },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
    status: { phase: 'Running' },
  } as CodingRun;
  const diff = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n';
  const done = {
    written: [] as CodingRunStatus[],
    events: [] as { type: string; reason: string }[],
    diffsWritten: 0,
    statesDeleted: 0,
    released: [] as string[],
    forgotten: [] as string[],
    warned: [] as string[],
  };
  const deps = {
    states: {
      load: async () => undefined,
      delete: async () => {
        done.statesDeleted++;
      },
    },
    status: {
      write: async (
        _namespace: string,
        _name: string,
        _uid: string,
        change: (status: CodingRunStatus, run: CodingRun) => CodingRunStatus,
      ) => {
        const status = change({ ...run.status }, run);
        done.written.push(status);
        return { written: true, run: { ...run, status } };
      },
    },
    resources: {
      writeDiff: async () => {
        done.diffsWritten++;
        return { outcome: 'written', configMap: 'r-diff' };
      },
    },
    sandboxes: {
      for: () => ({
        call: async () => ({
          ok: true,
          result: {
            exitCode: 0,
            stdout: diff,
            stderr: `${diff.length}\n 1 file changed, 1 insertion(+), 1 deletion(-)\n`,
            stdoutTruncated: false,
          },
        }),
      }),
      release: async (uid: string) => {
        done.released.push(uid);
      },
    },
    scripts: { forget: (uid: string) => done.forgotten.push(uid) },
    transcript: { append: async () => undefined },
    events: {
      record: async (_run: CodingRun, event: { type: string; reason: string }) => {
        done.events.push(event);
      },
    },
    metrics: { runsFinished: { inc() {} }, runDuration: { observe() {} } },
    getRun: async () => run,
    logger: {
      info() {},
      warn: (_fields: object, message: string) => done.warned.push(message),
      error() {},
      child: () => deps.logger,
    },
    now: () => new Date('2026-11-30T00:00:00Z'),
  } as unknown as AgentDependencies;
  return { deps, done };
}

describe('failRun: a job finds no state for a run with a cancel requested', () => {
  it("writes no Failed/StateLost over the controller's Cancelled ending, keeps no diff, and still forgets the run", async () => {
    const { deps, done } = stateGone({ [CANCEL_ANNOTATION]: 'not needed' });
    await failRun(deps, ref, REASONS.StateLost, FAILURE_MESSAGES.stateGone);
    expect(done.written).toEqual([]);
    expect(done.events).toEqual([]);
    // The controller's ending takes the diff: a worker's final diff would race it.
    expect(done.diffsWritten).toBe(0);
    expect(done.statesDeleted).toBe(1);
    expect(done.released).toEqual([ref.uid]);
    expect(done.forgotten).toEqual([ref.uid]);
    expect(done.warned.join('\n')).toContain('cancel');
  });

  it('still fails a run without a cancel requested StateLost, with its Warning Event', async () => {
    const { deps, done } = stateGone();
    await failRun(deps, ref, REASONS.StateLost, FAILURE_MESSAGES.stateGone);
    expect(done.written.at(-1)).toMatchObject({ phase: 'Failed', reason: REASONS.StateLost });
    expect(done.events).toEqual([expect.objectContaining({ type: 'Warning', reason: REASONS.StateLost })]);
    expect(done.statesDeleted).toBe(1);
  });

  it('still fails a run with a cancel requested for a reason other than StateLost', async () => {
    const { deps, done } = stateGone({ [CANCEL_ANNOTATION]: '' });
    await failRun(deps, ref, REASONS.AgentFailed, 'The agent failed.');
    expect(done.written.at(-1)).toMatchObject({ phase: 'Failed', reason: REASONS.AgentFailed });
    expect(done.events).toEqual([expect.objectContaining({ type: 'Warning', reason: REASONS.AgentFailed })]);
  });
});
