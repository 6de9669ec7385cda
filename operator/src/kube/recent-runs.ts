// Reads of a run with bounded staleness, for the workers: the run as the API server itself
// last returned it to this process (the answer to a status write or a GET) serves a read for
// RECENT_RUN_MAX_AGE_MS, instead of a GET per job. A finished 3-step run made six such GETs,
// each right after this process had written the run and been given it whole.
//
// Why this is safe (issue #17.5): a job reads the run to act only on the run as it is now (its
// uid, not deleted, not finished, and its mutable spec: budget, approval.tools, publish). A
// fresh GET gave "as of the job's start", and the job then used that spec for seconds (the
// model call) anyway, so a change already took effect only at the next job started after it.
// Here it takes effect at the next job started more than RECENT_RUN_MAX_AGE_MS after it, and
// sooner whenever this process's run cache (the leader's informer) has seen it: a cached copy
// whose generation is newer than the remembered one (a spec edit), or that is being deleted,
// makes the read a GET. Nothing older than the bound is ever served: a job picked up later,
// or by another replica, reads fresh.
import type { CodingRun } from '../api/index.ts';
import type { KubeGateway } from './kube-gateway.ts';

/** How stale a run a worker acts on may be (besides what the run cache shows newer). */
export const RECENT_RUN_MAX_AGE_MS = 2_000;

/** The run cache of this process, when it has a live one (the leader's informer). */
export interface RunCacheView {
  get(namespace: string, name: string): CodingRun | undefined;
}

interface Known {
  run: CodingRun;
  at: number;
}

/**
 * Whether a remembered run may serve a read (pure): it is recent enough, and the cache, when
 * it has the same run, shows no newer spec (generation) and no deletion.
 */
export function mayServe(known: Known | undefined, cached: CodingRun | undefined, now: number, maxAgeMs: number): known is Known {
  if (!known || now - known.at > maxAgeMs) return false;
  if (cached && cached.metadata.uid === known.run.metadata.uid) {
    if ((cached.metadata.generation ?? 0) > (known.run.metadata.generation ?? 0)) return false;
    if (cached.metadata.deletionTimestamp && !known.run.metadata.deletionTimestamp) return false;
  }
  return true;
}

export class RecentRuns {
  private readonly known = new Map<string, Known>();

  constructor(
    private readonly fetch: (namespace: string, name: string) => Promise<CodingRun | undefined>,
    private readonly cache: () => RunCacheView | undefined = () => undefined,
    private readonly maxAgeMs = RECENT_RUN_MAX_AGE_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A run as the API server returned it just now (a write's answer or a GET). */
  learned(run: CodingRun | undefined): void {
    if (!run?.metadata?.name) return;
    const now = this.now();
    // Bounded: what is too old to serve is dropped whenever something is learned.
    for (const [key, entry] of this.known) if (now - entry.at > this.maxAgeMs) this.known.delete(key);
    this.known.set(`${run.metadata.namespace}/${run.metadata.name}`, { run, at: now });
  }

  /** The run, at most maxAgeMs stale (see above); a GET when nothing recent enough is known. */
  async read(namespace: string, name: string): Promise<CodingRun | undefined> {
    const key = `${namespace}/${name}`;
    const known = this.known.get(key);
    if (mayServe(known, this.cache()?.get(namespace, name), this.now(), this.maxAgeMs)) return structuredClone(known.run);
    return this.readFresh(namespace, name);
  }

  /** A GET, remembered for the reads after it. */
  async readFresh(namespace: string, name: string): Promise<CodingRun | undefined> {
    const run = await this.fetch(namespace, name);
    if (run) this.learned(run);
    else this.known.delete(`${namespace}/${name}`);
    return run;
  }
}

/** The gateway, remembering every run the API server returns through it (reads and writes alike). */
export function rememberingRuns(kube: KubeGateway, recent: RecentRuns): KubeGateway {
  const remember = async (answer: Promise<CodingRun>) => {
    const run = await answer;
    recent.learned(run);
    return run;
  };
  return {
    ...kube,
    getRun: (namespace, name) => recent.readFresh(namespace, name),
    replaceRunStatus: (run, status) => remember(kube.replaceRunStatus(run, status)),
    patchRunStatus: (namespace, name, operations) => remember(kube.patchRunStatus(namespace, name, operations)),
    setRunFinalizers: (run, finalizers) => remember(kube.setRunFinalizers(run, finalizers)),
  };
}
