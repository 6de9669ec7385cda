// The live runs the proxy serves, by uid: fed by a watch on CodingRuns, read on every
// connection. A run is in it only while it lives (not finished, not being deleted): that is
// what ends a run's proxy credential with the run (proxy-credential.ts). What the run may
// reach is read from its spec, which the API server keeps immutable after creation. The
// watch's cache keeps of each run only the verdict on it (slimForEgress): the spec and status it
// kept before (the task, the instructions, sandbox.env's values, the recorded template) were
// ~1.4 MiB for the largest run the API server takes, for every run kept in the cluster, served
// or not: ~130 such runs, refused ones included, filled the proxy's 256 Mi, and as it lists
// them all before it listens, it ran out again at each restart.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { PLURAL, codingRunSpec, isTerminal, type CodingRun } from '../api/index.ts';
import { customObjectSource } from '../controller/custom-object-source.ts';
import type { InformerSource } from '../controller/informer.ts';
import type { EgressRun } from './decide-connection.ts';
import { parseHostPatterns } from './host-pattern.ts';
import { effectiveSpecInput } from '../reconcile/run-template.ts';

/**
 * Where a slim copy keeps egressRunOf's verdict on the whole run. A symbol, so that no object
 * read from JSON (the API server's answer) carries one: a run's own fields can never stand in
 * for the verdict.
 */
const VERDICT = Symbol('egressRunOf');

type SlimRun = CodingRun & { [VERDICT]: EgressRun | undefined };

/** The run as the proxy serves it, or undefined when it must not be served (ended, deleting, invalid, no egress). */
export function egressRunOf(run: CodingRun): EgressRun | undefined {
  if (VERDICT in run) return (run as SlimRun)[VERDICT];
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
 * What the proxy's cache keeps of a run: its identity and the resourceVersion the cache
 * compares, and egressRunOf's verdict on the whole run as it came (its name and allow list for
 * a run served, nothing for one not served). Its spec is left empty. The verdict never goes
 * stale: it reads nothing but the run, and a change to the run comes as a new object, slimmed
 * anew. egressRunOf(slimForEgress(run)) is egressRunOf(run).
 */
export function slimForEgress(run: CodingRun): CodingRun {
  const { name, namespace, uid, resourceVersion } = run.metadata;
  const slim: SlimRun = {
    apiVersion: run.apiVersion,
    kind: run.kind,
    metadata: { name, namespace, uid, ...(resourceVersion !== undefined ? { resourceVersion } : {}) },
    spec: {} as CodingRun['spec'],
    [VERDICT]: egressRunOf(run),
  };
  return slim;
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
