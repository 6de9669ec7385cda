// The live runs the proxy serves, by uid: fed by a watch on CodingRuns, read on every
// connection. A run is in it only while it lives (not finished, not being deleted): that is
// what ends a run's proxy credential with the run (proxy-credential.ts). What the run may
// reach is read from its spec, which the API server keeps immutable after creation. The
// watch's cache keeps of each run only what that reading needs (slimForEgress): its status
// (results, egress tallies, conditions) and annotations (kubectl's last-applied copy of the
// spec) otherwise stayed in the proxy's memory for every run kept in the cluster.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { PLURAL, codingRunSpec, isTerminal, type CodingRun } from '../api/index.ts';
import { customObjectSource } from '../controller/custom-object-source.ts';
import type { InformerSource } from '../controller/informer.ts';
import type { EgressRun } from './decide-connection.ts';
import { parseHostPatterns } from './host-pattern.ts';
import { effectiveSpecInput } from '../reconcile/run-template.ts';

/** The run as the proxy serves it, or undefined when it must not be served (ended, deleting, invalid, no egress). */
export function egressRunOf(run: CodingRun): EgressRun | undefined {
  if (run.metadata.deletionTimestamp || isTerminal(run.status?.phase)) return undefined;
  // spec.templateRef: the template recorded when the run was accepted, with the run's own fields over it.
  const input = effectiveSpecInput(run);
  if (!input.ok) return undefined;
  const spec = codingRunSpec.safeParse(input.spec);
  if (!spec.success) return undefined;
  const allow = parseHostPatterns(spec.data.sandbox.egress.allow);
  if (allow.length === 0) return undefined;
  return { namespace: run.metadata.namespace, name: run.metadata.name, uid: run.metadata.uid, allow };
}

/**
 * What the proxy's cache keeps of a run: what egressRunOf reads (the identity and deletion of
 * its metadata, its spec, and of its status the phase, the recorded template and the Accepted
 * condition) and the resourceVersion the cache compares. egressRunOf(slimForEgress(run)) is
 * egressRunOf(run).
 */
export function slimForEgress(run: CodingRun): CodingRun {
  const { name, namespace, uid, resourceVersion, deletionTimestamp } = run.metadata;
  const accepted = run.status?.conditions?.filter((condition) => condition.type === 'Accepted');
  const status = {
    ...(run.status?.phase !== undefined ? { phase: run.status.phase } : {}),
    ...(run.status?.template !== undefined ? { template: run.status.template } : {}),
    ...(accepted?.length ? { conditions: accepted } : {}),
  };
  return {
    apiVersion: run.apiVersion,
    kind: run.kind,
    metadata: {
      name,
      namespace,
      uid,
      ...(resourceVersion !== undefined ? { resourceVersion } : {}),
      ...(deletionTimestamp !== undefined ? { deletionTimestamp } : {}),
    },
    spec: run.spec,
    ...(Object.keys(status).length > 0 ? { status: status as CodingRun['status'] } : {}),
  };
}

/** Where the proxy watches CodingRuns (one namespace, or all when undefined), keeping each slim. */
export function egressRunSource(custom: CustomObjectsApi, namespace: string | undefined): InformerSource<CodingRun> {
  return { ...customObjectSource<CodingRun>(custom, namespace, PLURAL), slim: slimForEgress };
}

export class RunDirectory {
  private readonly byUid = new Map<string, EgressRun>();
  /** uid by namespace/name, so a delete (which carries the last object) finds the entry. */
  private readonly uidByKey = new Map<string, string>();

  lookup(uid: string): EgressRun | undefined {
    return this.byUid.get(uid);
  }

  get size(): number {
    return this.byUid.size;
  }

  onChange(run: CodingRun): void {
    const key = `${run.metadata.namespace}/${run.metadata.name}`;
    const previous = this.uidByKey.get(key);
    if (previous !== undefined && previous !== run.metadata.uid) this.byUid.delete(previous);
    const entry = egressRunOf(run);
    if (entry) {
      this.byUid.set(run.metadata.uid, entry);
      this.uidByKey.set(key, run.metadata.uid);
    } else {
      this.byUid.delete(run.metadata.uid);
      this.uidByKey.delete(key);
    }
  }

  onDelete(run: CodingRun): void {
    this.byUid.delete(run.metadata.uid);
    this.uidByKey.delete(`${run.metadata.namespace}/${run.metadata.name}`);
  }
}
