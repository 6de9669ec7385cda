// How the workers change a run's status: read the run (the first time, what the API server
// returned a moment ago will do), apply a change, replace the status guarded by the
// resourceVersion, and on a conflict read it fresh and start over. A run that is
// already terminal is never written (the controller may have ended it: SandboxLost,
// DeadlineExceeded, or the run was deleted), and the caller learns so and stops working.
import { isTerminal, type CodingRun, type CodingRunStatus, type RunTiming } from '../api/index.ts';
import { isConflict } from '../kube/api-errors.ts';
import type { KubeGateway } from '../kube/kube-gateway.ts';
import type { RecentRuns } from '../kube/recent-runs.ts';

export type StatusChange = (status: CodingRunStatus, run: CodingRun) => CodingRunStatus;

export type WriteOutcome = { written: true; run: CodingRun } | { written: false; why: 'gone' | 'terminal'; run?: CodingRun };

/** The progress of a running run: what each step changes. */
export interface StepProgress {
  steps: number;
  toolCalls: number;
  usage: object;
  /** The whole of status.timings as it is to be, when the step adds to it (the same request carries it). */
  timings?: RunTiming[];
}

export class RunStatusWriter {
  constructor(
    private readonly kube: Pick<KubeGateway, 'getRun' | 'replaceRunStatus' | 'patchRunStatus'>,
    private readonly maxAttempts = 8,
    /** Serves the first attempt's read (kube/recent-runs.ts): a stale one only costs a conflict, and the next attempt reads fresh. */
    private readonly recent?: Pick<RecentRuns, 'read'>,
  ) {}

  /**
   * A step's progress in one request: a JSON Patch that only applies while the run is
   * this run and still Running (so a terminal phase is never overwritten). Returns false
   * when those tests fail; the caller then takes the read-modify-write path of write().
   */
  async progress(namespace: string, name: string, uid: string, progress: StepProgress): Promise<CodingRun | undefined> {
    try {
      return await this.kube.patchRunStatus(namespace, name, [
        { op: 'test', path: '/metadata/uid', value: uid },
        { op: 'test', path: '/status/phase', value: 'Running' },
        { op: 'add', path: '/status/steps', value: progress.steps },
        { op: 'add', path: '/status/toolCalls', value: progress.toolCalls },
        { op: 'add', path: '/status/usage', value: progress.usage },
        ...(progress.timings ? [{ op: 'add', path: '/status/timings', value: progress.timings }] : []),
      ]);
    } catch (error) {
      const code = (error as { code?: number }).code;
      if (code === 422 || code === 409 || code === 404) return undefined;
      throw error;
    }
  }

  async write(namespace: string, name: string, uid: string, change: StatusChange): Promise<WriteOutcome> {
    for (let attempt = 1; ; attempt++) {
      const run = attempt === 1 && this.recent ? await this.recent.read(namespace, name) : await this.kube.getRun(namespace, name);
      if (!run || run.metadata.uid !== uid || run.metadata.deletionTimestamp) return { written: false, why: 'gone' };
      if (isTerminal(run.status?.phase)) return { written: false, why: 'terminal', run };
      const status = change(structuredClone(run.status ?? {}), run);
      try {
        return {
          written: true,
          run: await this.kube.replaceRunStatus(run, { ...status, observedGeneration: run.metadata.generation ?? 0 }),
        };
      } catch (error) {
        if (!isConflict(error) || attempt >= this.maxAttempts) throw error;
      }
    }
  }
}
