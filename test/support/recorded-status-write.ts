// A stand-in for RunStatusWriter.write (workers/run-status-writer.ts) in the worker tests that
// give a job in-memory dependencies: the job's change is applied to the run's status as the
// writer applies it, and what it computed is kept for the test to read, with no API server.
import type { CodingRun, CodingRunStatus } from '../../operator/src/api/index.ts';
import type { WriteOutcome } from '../../operator/src/workers/run-status-writer.ts';

/**
 * `status.write` for `run`: each change's status is pushed to `statuses`. The writer's answer is
 * `outcome`: 'written' (the run with that status), or 'terminal' (it found the run ended and
 * wrote nothing), for a test that wants the job to go on as if its write had not landed.
 */
export function recordedStatusWrite(run: CodingRun, statuses: CodingRunStatus[], outcome: 'written' | 'terminal') {
  return async (
    _namespace: string,
    _name: string,
    _uid: string,
    change: (status: CodingRunStatus, run: CodingRun) => CodingRunStatus,
  ): Promise<WriteOutcome> => {
    const status = change({ ...run.status }, run);
    statuses.push(status);
    return outcome === 'written' ? { written: true, run: { ...run, status } } : { written: false, why: 'terminal' };
  };
}
