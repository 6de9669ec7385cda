// Reads of a run with bounded staleness, for the workers, without a GET per job. A read is
// served, in this order, by:
//
// 1. The leader's run cache (the informer this process keeps while it leads), when it has
//    caught up with everything this process has seen of the run: the same uid, and a
//    resourceVersion at least that of the last copy the API server returned here (a status
//    write's answer or a GET). The watch delivering this process's own last write is the
//    proof that it is alive; a cache behind it is not used.
// 2. The run as the API server last returned it to this process, for RECENT_RUN_MAX_AGE_MS
//    (the watch has usually not delivered a write made a few milliseconds ago).
// 3. A GET.
//
// Why this is safe (issue #17.5): a job reads the run to act only on the run as it is now (its
// uid, not deleted, not finished, and its mutable spec: budget, approval.tools, publish). A
// fresh GET gave "as of the job's start", and the job then used that spec for seconds (the
// model call) anyway, so a change already took effect only at the next job started after it.
// From the cache a change takes effect as soon as the leader's watch has delivered it, as in
// controller-runtime's cached reads. A remembered copy is not served when the cache shows a
// newer spec (generation) or a deletion, and never once it is older than the bound. Another
// replica has no run cache: it serves what it wrote within the bound and reads fresh after.
//
// What is given up: a watch that dies silently (no error; the informer notices within its
// timeoutSeconds, 4 to 6 minutes) after delivering the run's last write holds a copy that
// matches everything this process saw, so one job may act on it after a change it missed.
// That job's own status write brings back the newer copy, the cache no longer matches it,
// and the next job reads fresh: one job, as a GET-based read already allowed for a change
// made during a job's model call.
import type { CodingRun } from '../api/index.ts';
import type { KubeGateway } from './kube-gateway.ts';

/** How stale a remembered run a worker acts on may be (besides what the run cache shows newer). */
export const RECENT_RUN_MAX_AGE_MS = 2_000;

/**
 * How long the version this process last saw of a run is kept, for checking the cache against
 * it: longer than a step's wait in the queue. A run not written here for longer (one waiting
 * for an approval) is read fresh once, and seen again.
 */
export const SEEN_VERSION_MAX_AGE_MS = 10 * 60_000;

/** The run cache of this process, when it has a live one (the leader's informer). */
export interface RunCacheView {
  get(namespace: string, name: string): CodingRun | undefined;
}

interface Known {
  run: CodingRun;
  at: number;
}

/** The version of a run the API server last returned to this process, and when. */
export interface Seen {
  uid: string;
  resourceVersion: string;
  at: number;
}

/** Where a read of a run is served from: the leader's cache, a copy remembered from a write, or a GET. */
export type ReadSource = 'cache' | 'remembered' | 'get';

/** A resourceVersion as KEP-5504 defines the comparable ones: a positive integer without leading zeros. */
const COMPARABLE_VERSION = /^[1-9][0-9]*$/;

/**
 * Whether resourceVersion `version` is at least `than`, for one object. Kubernetes 1.35 made
 * resourceVersions comparable (KEP-5504, client-go's CompareResourceVersion): positive
 * integers, compared as numbers, that grow with every write to a resource; an API server's
 * from etcd always were. Versions not of that form compare only for equality.
 */
export function isAtLeastVersion(version: string | undefined, than: string): boolean {
  if (version === undefined) return false;
  if (!COMPARABLE_VERSION.test(version) || !COMPARABLE_VERSION.test(than)) return version === than;
  return BigInt(version) >= BigInt(than);
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

/**
 * Where a read is served from (pure): the cache once it holds the run as this process last saw
 * it or newer, else a remembered copy that mayServe, else a GET.
 */
export function readSource(
  known: Known | undefined,
  seen: Seen | undefined,
  cached: CodingRun | undefined,
  now: number,
  maxAgeMs: number,
): ReadSource {
  if (cached && seen && cached.metadata.uid === seen.uid && isAtLeastVersion(cached.metadata.resourceVersion, seen.resourceVersion))
    return 'cache';
  return mayServe(known, cached, now, maxAgeMs) ? 'remembered' : 'get';
}

/** Drops the oldest entries of a map kept in the order of their last update, up to the first not older than `before`. */
function dropOlder<T extends { at: number }>(entries: Map<string, T>, before: number): void {
  for (const [key, entry] of entries) {
    if (entry.at >= before) return;
    entries.delete(key);
  }
}

export class RecentRuns {
  /** Both in the order of their last update (deleted and set again), so the oldest are first. */
  private readonly known = new Map<string, Known>();
  private readonly seen = new Map<string, Seen>();

  constructor(
    private readonly fetch: (namespace: string, name: string) => Promise<CodingRun | undefined>,
    private readonly cache: () => RunCacheView | undefined = () => undefined,
    private readonly maxAgeMs = RECENT_RUN_MAX_AGE_MS,
    private readonly now: () => number = () => performance.now(),
    private readonly seenMaxAgeMs = SEEN_VERSION_MAX_AGE_MS,
  ) {}

  /** A run as the API server returned it just now (a write's answer or a GET). */
  learned(run: CodingRun | undefined): void {
    if (!run?.metadata?.name) return;
    const now = this.now();
    const key = `${run.metadata.namespace}/${run.metadata.name}`;
    this.known.delete(key);
    this.known.set(key, { run, at: now });
    const { uid, resourceVersion } = run.metadata;
    const before = this.seen.get(key);
    // A GET answered after a write may carry an older version than the write's answer: the newest stays.
    if (uid && resourceVersion && (!before || before.uid !== uid || isAtLeastVersion(resourceVersion, before.resourceVersion))) {
      this.seen.delete(key);
      this.seen.set(key, { uid, resourceVersion, at: now });
    }
    // Bounded: what is too old to serve (or to check the cache against) goes, oldest first.
    dropOlder(this.known, now - this.maxAgeMs);
    dropOlder(this.seen, now - this.seenMaxAgeMs);
  }

  /** The run from the leader's cache, a copy remembered from a write, or a GET (see above). */
  async read(namespace: string, name: string): Promise<CodingRun | undefined> {
    return this.readHeld(namespace, name) ?? this.readFresh(namespace, name);
  }

  /**
   * The run as read() serves it without a request (the leader's cache, a copy remembered from a
   * write), or undefined where read() would GET: for a look a worker skips rather than pay a
   * request for (step-job.ts, the look for a cancel after the model call).
   */
  readHeld(namespace: string, name: string): CodingRun | undefined {
    const key = `${namespace}/${name}`;
    const known = this.known.get(key);
    const cached = this.cache()?.get(namespace, name);
    const now = this.now();
    const seen = this.seen.get(key);
    const recentlySeen = seen && now - seen.at <= this.seenMaxAgeMs ? seen : undefined;
    switch (readSource(known, recentlySeen, cached, now, this.maxAgeMs)) {
      case 'cache':
        return structuredClone(cached);
      case 'remembered':
        return structuredClone(known!.run);
      case 'get':
        return undefined;
    }
  }

  /** A GET, remembered for the reads after it. */
  async readFresh(namespace: string, name: string): Promise<CodingRun | undefined> {
    const run = await this.fetch(namespace, name);
    if (run) this.learned(run);
    else {
      this.known.delete(`${namespace}/${name}`);
      this.seen.delete(`${namespace}/${name}`);
    }
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
