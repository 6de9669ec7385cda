// The run reference: which run a job, a run state or a sandbox session is for. It travels in
// every job's data (signed, run-state-seal.ts) and in every run state, and names the run by
// namespace and name to find it and by uid to be sure it is the same run: a run deleted and
// created again under the same name is another run, and its jobs and state are not the old
// one's. Pure.

export interface RunRef {
  uid: string;
  namespace: string;
  name: string;
}

/** The reference of a run object (the live run's identity, never a state's or a job's). */
export function runRefOf(run: { metadata: RunRef }): RunRef {
  return { uid: run.metadata.uid, namespace: run.metadata.namespace, name: run.metadata.name };
}

/** The reference in job data or a state: those three fields and nothing else that travels with them. */
export function runRefFrom(data: RunRef): RunRef {
  return { uid: data.uid, namespace: data.namespace, name: data.name };
}

export function isSameRun(a: RunRef, b: RunRef): boolean {
  return a.uid === b.uid && a.namespace === b.namespace && a.name === b.name;
}

/** How messages name a run: namespace/name (uid ...). */
export function describeRunRef(ref: RunRef): string {
  return `${ref.namespace}/${ref.name} (uid ${ref.uid})`;
}
