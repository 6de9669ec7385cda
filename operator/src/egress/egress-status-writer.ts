// Writes the audit's counts into a run's status.egress: read the run, add the delta to what
// its status holds, write with a JSON Patch whose `test` of the resourceVersion makes a
// concurrent writer (the operator, another proxy replica) a retry instead of a lost update.
import type { EgressStatus } from '../api/index.ts';
import { isNotFound, statusCodeOf } from '../kube/api-errors.ts';
import type { KubeGateway } from '../kube/kube-gateway.ts';
import type { EgressRun } from './decide-connection.ts';
import { mergeEgressStatus } from './egress-tally.ts';

const ATTEMPTS = 5;

export function createEgressStatusWriter(kube: Pick<KubeGateway, 'getRun' | 'patchRunStatus'>) {
  return async function addToStatus(run: EgressRun, delta: EgressStatus): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const current = await kube.getRun(run.namespace, run.name);
      // Gone, or a new run of the same name: these counts belong to nobody now.
      if (!current || current.metadata.uid !== run.uid) return;
      const merged = mergeEgressStatus(current.status?.egress, delta);
      try {
        await kube.patchRunStatus(run.namespace, run.name, [
          { op: 'test', path: '/metadata/resourceVersion', value: current.metadata.resourceVersion },
          current.status ? { op: 'add', path: '/status/egress', value: merged } : { op: 'add', path: '/status', value: { egress: merged } },
        ]);
        return;
      } catch (error) {
        if (isNotFound(error)) return;
        // A failed test is 422 (or 409): someone wrote in between; read again.
        const code = statusCodeOf(error);
        if ((code === 422 || code === 409) && attempt < ATTEMPTS) continue;
        throw error;
      }
    }
  };
}
