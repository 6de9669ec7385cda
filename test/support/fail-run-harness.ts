// failRun (workers/fail-run.ts) with in-memory dependencies (recorders), for the tests of what a
// worker's failure writes and drops: a Running run in ns/r (uid-1) whose sandbox answers a
// one-line diff, so a kept diff can be seen in the status. What the job did is in `done`.
import type { CodingRun, CodingRunStatus } from '../../operator/src/api/index.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { recordedStatusWrite } from './recorded-status-write.ts';

/** The run the harness fails. */
export const FAILED_RUN_REF = { namespace: 'ns', name: 'r', uid: 'uid-1' };

export interface FailRunHarnessOptions {
  /** What the run's state loads as; absent, the state is gone. */
  readonly state?: Partial<RunState>;
  /** The run's annotations (a cancel request). */
  readonly annotations?: Record<string, string>;
}

/** The run's dependencies for failRun, and what it did through them. */
export function failRunHarness(options: FailRunHarnessOptions = {}) {
  const run = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...FAILED_RUN_REF, generation: 1, ...(options.annotations ? { annotations: options.annotations } : {}) },
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
      load: async () => options.state,
      delete: async () => {
        done.statesDeleted++;
      },
    },
    status: { write: recordedStatusWrite(run, done.written, 'written') },
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
