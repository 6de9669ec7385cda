// How many name lookups the proxy has in flight at once, per run and per namespace. getaddrinfo
// runs on libuv's thread pool (UV_THREADPOOL_SIZE threads, 4 unless set; the chart sets 64),
// shared by every run, and a lookup whose name server never answers holds a thread for the
// resolver's whole timeout. Unlimited, one run that asked for a few such names held every
// thread; limited per run alone, 32 runs of one namespace still did, and every other
// namespace's CONNECTs waited behind them. So a run has at most LOOKUPS_PER_RUN in flight and
// the runs of one namespace together a quarter of the pool; the rest wait their turn, per run
// and per namespace, so another namespace's lookup starts at once while fewer than four
// namespaces fill their share.
import { KeyedLimit } from './keyed-limit.ts';

/** Name lookups one run may have in flight at once; more wait their turn. */
export const LOOKUPS_PER_RUN = 2;

/** libuv's thread pool when UV_THREADPOOL_SIZE is not set, and the most it takes. */
const LIBUV_DEFAULT_THREADS = 4;
const LIBUV_MAX_THREADS = 1024;

/** The thread pool libuv starts with this environment: UV_THREADPOOL_SIZE read as libuv reads it (atoi, 0 is 1, at most 1024). */
export function libuvThreadPoolSize(env: NodeJS.ProcessEnv): number {
  const text = env.UV_THREADPOOL_SIZE;
  if (text === undefined) return LIBUV_DEFAULT_THREADS;
  const value = Number.parseInt(text, 10);
  return Math.min(LIBUV_MAX_THREADS, Math.max(1, Number.isNaN(value) ? 0 : value));
}

/** Lookups the runs of one namespace may have in flight together: a quarter of the pool, and never fewer than one run's. */
export function lookupsPerNamespace(threadPoolSize: number): number {
  return Math.max(LOOKUPS_PER_RUN, Math.floor(threadPoolSize / 4));
}

export interface LookupLimits {
  perRun: number;
  perNamespace: number;
}

/** The bounds for libuv's default pool (4 threads): what the proxy uses unless told the pool it runs on. */
export const DEFAULT_LOOKUP_LIMITS: LookupLimits = {
  perRun: LOOKUPS_PER_RUN,
  perNamespace: lookupsPerNamespace(LIBUV_DEFAULT_THREADS),
};

export class LookupLimit {
  private readonly runs: KeyedLimit;
  private readonly namespaces: KeyedLimit;

  constructor(limits: LookupLimits) {
    this.runs = new KeyedLimit(limits.perRun);
    this.namespaces = new KeyedLimit(limits.perNamespace);
  }

  /** Runs `lookup` once its run and its namespace both have room. */
  run<T>(run: { uid: string; namespace: string }, lookup: () => Promise<T>): Promise<T> {
    // The run's turn first, then the namespace's: a run's waiting lookups take none of the
    // namespace's places, which its other runs share.
    return this.runs.run(run.uid, () => this.namespaces.run(run.namespace, lookup));
  }
}
