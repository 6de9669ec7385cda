// Tool sessions opened ahead into warm pool pods (docs/warm-pools.md). On a real node a run's
// first session costs an exec and the toolbox's start in the container, 150-500 ms that a claimed
// run used to pay after its claim. The pool loop keeps one session open into each ready pool pod
// (nothing of any run is in it: an empty workspace, the pod's own env); the claimed run's sandbox
// takes it, only after the read of the pod that precedes every exec shows the run as the pod's
// controller and the pod's uid as the one the session was opened in
// (kubernetes-exec-transport.ts). A session that no run of this process takes (its prepare job
// ran on another replica, or the pod went) is closed a little later.
import type { ToolboxProcess } from './toolbox-transport.ts';

/** A pool pod as the pool loop sees it: the uid is the pod the session must be opened in. */
export interface PoolPodRef {
  namespace: string;
  name: string;
  uid: string;
}

/** A session held for a pod: the process, and the uid of the pod it was opened in. */
export interface HeldSession {
  podUid: string;
  process: ToolboxProcess;
}

/** Opens `toolbox serve` in the pool pod, after checking the pod by that name is still this one (uid). */
export type WarmSessionStarter = (pod: PoolPodRef) => Promise<ToolboxProcess>;

export interface WarmSessionLogger {
  warn(fields: object, message: string): void;
}

/** How long a session whose pod left the pool (a claim) waits for the claimed run's prepare job. */
export const LEFT_POOL_GRACE_MS = 30_000;
/**
 * A pod whose session failed to open or ended while held is not tried again for this long: a
 * pool whose pods cannot be exec'd into (RBAC, an image without the toolbox) would otherwise
 * cost an exec and a warning per pod at every pass of the loop.
 */
export const RETRY_AFTER_MS = 30_000;

interface Entry {
  podUid: string;
  opening: Promise<ToolboxProcess | undefined>;
  /** When the pod was first missing from the pool: the grace runs from here. */
  leftPoolAt?: number;
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

export class WarmSessions {
  private readonly held = new Map<string, Entry>();
  /** Pod uids whose session failed or ended while held, with when. */
  private readonly failed = new Map<string, number>();

  constructor(
    private readonly start: WarmSessionStarter,
    private readonly deps: { logger: WarmSessionLogger; now?: () => number; graceMs?: number },
  ) {}

  /**
   * The pool's ready, unclaimed pods as of now: a session is opened into each that has none; a
   * held pod no longer listed (claimed, or gone) keeps its session for the grace, then it is closed.
   */
  keep(pods: readonly PoolPodRef[]): void {
    const now = this.deps.now?.() ?? Date.now();
    const listed = new Set<string>();
    const listedUids = new Set(pods.map((pod) => pod.uid));
    for (const [uid, at] of this.failed) if (!listedUids.has(uid) || now - at >= RETRY_AFTER_MS) this.failed.delete(uid);
    for (const pod of pods) {
      const key = keyOf(pod.namespace, pod.name);
      listed.add(key);
      const entry = this.held.get(key);
      // The same name with another uid is another pod: the old session is in a pod that went.
      if (entry && entry.podUid !== pod.uid) this.close(key);
      if (this.held.get(key)) {
        delete this.held.get(key)!.leftPoolAt;
        continue;
      }
      if (!this.failed.has(pod.uid)) this.open(key, pod);
    }
    for (const [key, entry] of this.held) {
      if (listed.has(key)) continue;
      entry.leftPoolAt ??= now;
      if (now - entry.leftPoolAt >= (this.deps.graceMs ?? LEFT_POOL_GRACE_MS)) this.close(key);
    }
  }

  /**
   * The session held for the pod, taken out (the caller owns it now, and must check the pod
   * before using it); undefined when none is held or it failed to open or has ended.
   */
  async take(namespace: string, podName: string): Promise<HeldSession | undefined> {
    const key = keyOf(namespace, podName);
    const entry = this.held.get(key);
    if (!entry) return undefined;
    this.held.delete(key);
    const process = await entry.opening;
    if (!process || (await isEnded(process))) return undefined;
    return { podUid: entry.podUid, process };
  }

  /** Every held session ends (leadership lost, shutdown). */
  closeAll(): void {
    for (const key of [...this.held.keys()]) this.close(key);
  }

  /** How many sessions are held (for tests and the log). */
  get size(): number {
    return this.held.size;
  }

  private open(key: string, pod: PoolPodRef): void {
    const entry: Entry = {
      podUid: pod.uid,
      opening: this.start(pod).then(
        (process) => {
          // Ended while held (the pod went, the connection dropped): no longer held.
          void process.exited.then(() => {
            if (this.held.get(key) !== entry) return;
            this.held.delete(key);
            this.failed.set(pod.uid, this.deps.now?.() ?? Date.now());
          });
          return process;
        },
        (error: unknown) => {
          if (this.held.get(key) === entry) this.held.delete(key);
          this.failed.set(pod.uid, this.deps.now?.() ?? Date.now());
          this.deps.logger.warn(
            { pod: key, err: error instanceof Error ? error.message : String(error) },
            'could not open a tool session ahead in a warm pool pod; its run will open one',
          );
          return undefined;
        },
      ),
    };
    this.held.set(key, entry);
  }

  private close(key: string): void {
    const entry = this.held.get(key);
    this.held.delete(key);
    void entry?.opening.then((process) => process?.kill());
  }
}

/** Whether the process has already ended (its exited promise settled), without waiting for it. */
async function isEnded(process: ToolboxProcess): Promise<boolean> {
  const pending = Symbol('pending');
  return (await Promise.race([process.exited, Promise.resolve(pending)])) !== pending;
}
