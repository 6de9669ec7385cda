// What the proxy does with each change its CodingRun watch reports: the directory serves the
// run or stops serving it, and the audit forgets a run as soon as it is no longer served.
// Waiting for the run's deletion kept each finished run's refused hosts (up to 64 host:port
// keys, ~23 KiB) in the proxy for as long as the run was kept, which is forever without a
// ttlSecondsAfterFinished: ~11k finished runs filled the proxy's 256 Mi.
import type { CodingRun } from '../api/index.ts';
import type { InformerHandlers } from '../controller/informer.ts';
import type { EgressAudit } from './egress-audit.ts';
import type { RunDirectory } from './run-directory.ts';

export function egressRunWatch(directory: RunDirectory, audit: Pick<EgressAudit, 'forget'>): InformerHandlers<CodingRun> {
  return {
    onChange: (run) => {
      directory.onChange(run);
      // Ended, being deleted, or never served: its credential is dead, so no refusal of it can
      // come any more (one decided just before is told, and kept until the run is deleted).
      if (directory.lookup(run.metadata.uid) === undefined) audit.forget(run.metadata.uid);
    },
    onDelete: (run) => {
      directory.onDelete(run);
      audit.forget(run.metadata.uid);
    },
  };
}
