// Writes the audit's counts into a run's status.egress: read the run, add the delta to what
// its status holds, write with a JSON Patch whose `test` of the resourceVersion makes a
// concurrent writer (the operator, another proxy replica) a retry instead of a lost update.
import type { EgressStatus } from '../api/index.ts';
import { isNotFound, isTooLargeToStore, statusCodeOf } from '../kube/api-errors.ts';
import type { KubeGateway } from '../kube/kube-gateway.ts';
import type { EgressRun } from './decide-connection.ts';
import { EgressStatusRefusedError } from './egress-status-refused-error.ts';
import { mergeEgressStatus } from './egress-tally.ts';

const ATTEMPTS = 5;

/**
 * Adds `delta` to the run's status.egress. Returns when written or when the run is gone (or is
 * a new run of the same name); throws EgressStatusRefusedError when the API server refuses the
 * write for good, and any other error when it failed in a way that may clear (5xx, the network,
 * a run changed by others at every attempt).
 */
export function createEgressStatusWriter(kube: Pick<KubeGateway, 'getRun' | 'patchRunStatus'>) {
  return async function addToStatus(run: EgressRun, delta: EgressStatus): Promise<void> {
    /** The last PATCH's 422 and the resourceVersion it tested. */
    let unprocessable: { version: string | undefined; error: unknown } | undefined;
    for (let attempt = 1; ; attempt++) {
      const current = await kube.getRun(run.namespace, run.name);
      // Gone, or a new run of the same name: these counts belong to nobody now.
      if (!current || current.metadata.uid !== run.uid) return;
      const version = current.metadata.resourceVersion;
      // A 422 is our `test` failing only if someone wrote in between; with the version
      // unchanged it was the API server refusing the object itself (the CRD's schema).
      if (unprocessable && unprocessable.version === version) throw new EgressStatusRefusedError(run, unprocessable.error);
      const merged = mergeEgressStatus(current.status?.egress, delta);
      try {
        await kube.patchRunStatus(run.namespace, run.name, [
          { op: 'test', path: '/metadata/resourceVersion', value: version },
          current.status ? { op: 'add', path: '/status/egress', value: merged } : { op: 'add', path: '/status', value: { egress: merged } },
        ]);
        return;
      } catch (error) {
        if (isNotFound(error)) return;
        const code = statusCodeOf(error);
        if (isTooLargeToStore(error) || code === 400 || code === 403 || code === 413) throw new EgressStatusRefusedError(run, error);
        // 422 (a failed `test`, or a refusal: told apart by the next read) or 409: read again.
        if ((code === 422 || code === 409) && attempt < ATTEMPTS) {
          unprocessable = code === 422 ? { version, error } : undefined;
          continue;
        }
        throw error;
      }
    }
  };
}
