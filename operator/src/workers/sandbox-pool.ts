// One kept sandbox connection per run's pod, shared by the jobs of that run in this
// process: a tool call then costs a message on an open exec session, not a new exec.
//
// A run's entry is released where the run ends (forgetRun, in the job that finds it ended) and
// by the leader (AgentQueue.stop), but a run's jobs spread over the replicas: every other
// replica that ran a step of it kept its entry (a ToolboxSandbox with its exec session, about
// 11 KiB of heap) until it restarted, and a replica that is not the leader slowly ran out of
// heap. So an entry that nothing has used for IDLE_MS is closed and dropped, by a sweep. That
// is safe: the toolbox keeps nothing a session needs between calls in its process (bash's
// state and the call journal are files in its home), and the next use of the run opens a new
// session, through the same handle a job may still hold. An entry with a call or an import in
// flight (a bash of up to 30 minutes) is never idle.
//
// A swept handle is no longer in the map, so release() cannot mark it; the pool remembers
// which handles each release ended (by the generation a handle was made in), so that a job
// still holding a handle of an ended run fails CLOSED instead of opening a sandbox in its pod.
import type { ParsedCodingRun } from '../api/index.ts';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import type { CallOptions, ImportOptions, Sandbox, ToolRequest } from '../sandbox/sandbox.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';

export type SandboxFactory = (run: ParsedCodingRun) => Sandbox;

/**
 * A run's steps come seconds apart, a step's model call takes minutes at most
 * (modelCallTimeoutSeconds, 5 by default), while an approval may be waited for for days. Past
 * this bound a session costs more kept (a toolbox process in the pod, an exec through the API
 * server, the operator's heap) than opening a new one does (an exec and a toolbox start, well
 * under a second, once).
 */
export const IDLE_MS = 10 * 60_000;
/** How often idle entries are looked for: an entry lives at most IDLE_MS and this long unused. */
export const SWEEP_INTERVAL_MS = 60_000;
/**
 * How many released runs are remembered. A record matters only while a job still holds a handle
 * made before the release: a job lives for a bash (30 minutes at most) and a model call, and a
 * replica does not end thousands of runs in that time. About 100 bytes each, so at most ~0.5 MiB.
 */
export const RELEASED_RUNS_KEPT = 4096;

export interface SandboxPoolOptions {
  idleMs?: number;
  /** 0: no timer (the owner calls sweep()). */
  sweepIntervalMs?: number;
  now?: () => number;
}

/** Whether an entry may be closed: nothing in flight, and unused for longer than the bound. Pure. */
export const isIdle = (entry: { inFlight: number; lastUsed: number }, now: number, idleMs: number): boolean =>
  entry.inFlight === 0 && now - entry.lastUsed > idleMs;

export class SandboxPool {
  private readonly entries = new Map<string, PooledSandbox>();
  /** uid → the last generation its release ended; oldest first, bounded by RELEASED_RUNS_KEPT. */
  private readonly released = new Map<string, number>();
  /** Counts the handles made: a handle's generation is its number. */
  private generation = 0;
  private readonly idleMs: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly create: SandboxFactory,
    options: SandboxPoolOptions = {},
  ) {
    this.idleMs = options.idleMs ?? IDLE_MS;
    this.now = options.now ?? Date.now;
    const interval = options.sweepIntervalMs ?? SWEEP_INTERVAL_MS;
    if (interval > 0) {
      this.timer = setInterval(() => void this.sweep(), interval);
      this.timer.unref(); // the sweep never keeps a process up
    }
  }

  for(run: ParsedCodingRun): Sandbox {
    const key = run.metadata.uid;
    let entry = this.entries.get(key);
    if (!entry) {
      entry = new PooledSandbox(this, run, this.create(run), this.now(), ++this.generation);
      this.entries.set(key, entry);
    }
    return entry;
  }

  /** Ends every handle of the run made so far, also those a sweep dropped from the map. */
  async release(uid: string): Promise<void> {
    const entry = this.entries.get(uid);
    this.entries.delete(uid);
    this.released.delete(uid); // re-inserted as the newest
    this.released.set(uid, this.generation);
    for (const oldest of this.released.keys()) {
      if (this.released.size <= RELEASED_RUNS_KEPT) break;
      this.released.delete(oldest);
    }
    if (entry) entry.released = true;
    await entry?.closeInner();
  }

  /** Closes and drops the entries nobody has used for the bound; returns how many. */
  async sweep(): Promise<number> {
    const now = this.now();
    const idle = [...this.entries].filter(([, entry]) => isIdle(entry, now, this.idleMs));
    for (const [uid] of idle) this.entries.delete(uid);
    await Promise.all(idle.map(([, entry]) => entry.closeInner()));
    return idle.length;
  }

  /** How many entries are kept (for tests and the log). */
  get size(): number {
    return this.entries.size;
  }

  async closeAll(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.entries.keys()].map((uid) => this.release(uid)));
  }

  /**
   * The entry a handle's next use goes through: its own while the pool keeps it, the run's
   * newer entry when a job opened one since, or itself again, with a new sandbox, after a sweep.
   */
  entryFor(handle: PooledSandbox): PooledSandbox {
    const key = handle.run.metadata.uid;
    if (handle.generation <= (this.released.get(key) ?? 0)) handle.released = true;
    if (handle.released) throw new SandboxError('CLOSED', 'the sandbox is closed');
    const current = this.entries.get(key);
    if (current) return current;
    handle.reopen(this.create(handle.run), this.now());
    this.entries.set(key, handle);
    return handle;
  }

  /** Marks an entry used now. */
  touch(entry: PooledSandbox): void {
    entry.lastUsed = this.now();
  }
}

/** The pool's handle on a run's sandbox: what jobs get from for(), and what the sweep counts. */
class PooledSandbox implements Sandbox {
  inFlight = 0;
  released = false;

  constructor(
    private readonly pool: SandboxPool,
    readonly run: ParsedCodingRun,
    private inner: Sandbox | undefined,
    public lastUsed: number,
    /** When the pool made this handle: a release of its run ends the handles made before it. */
    readonly generation: number,
  ) {}

  call(request: ToolRequest, options?: CallOptions): Promise<ToolResponse> {
    return this.use((sandbox) => sandbox.call(request, options));
  }

  importTree(tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, options?: ImportOptions): Promise<void> {
    return this.use((sandbox) => sandbox.importTree(tar, options));
  }

  async open(): Promise<void> {
    await this.use(async (sandbox) => sandbox.open?.());
  }

  /** A job that closes its sandbox ends the run's entry, as release() does. */
  close(): Promise<void> {
    return this.pool.release(this.run.metadata.uid).then(async () => {
      this.released = true;
      await this.closeInner();
    });
  }

  reopen(inner: Sandbox, now: number): void {
    this.inner = inner;
    this.lastUsed = now;
  }

  async closeInner(): Promise<void> {
    const inner = this.inner;
    this.inner = undefined;
    await inner?.close().catch(() => undefined);
  }

  private async use<T>(work: (sandbox: Sandbox) => Promise<T>): Promise<T> {
    const entry = this.pool.entryFor(this);
    entry.inFlight += 1;
    this.pool.touch(entry);
    try {
      return await work(entry.inner!);
    } finally {
      entry.inFlight -= 1;
      this.pool.touch(entry);
    }
  }
}
