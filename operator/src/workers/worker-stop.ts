// A replica's workers stopping (agent-runtime.ts stopTakingJobs, the first thing
// shutdown-sequence.ts calls). BullMQ's Worker.close first disconnects its blocking Redis
// connection and waits for that connection's 'end' event, which an ioredis client already
// reconnecting never emits. With Redis gone (`helm uninstall` deletes the bundled Redis beside
// the operator; a Redis outage during a rollout) close() never resolved, and the stop held the
// pod until the end of its grace period. Once no job is in this worker's hands and Redis is
// unreachable, nothing is left to wait for: a job a fetch took and did not start is still
// locked in Redis and handed out again when the lock expires, as after a crash.

/** The jobs this worker is running (agent-worker.ts counts them around each job it runs). */
export class JobsInHand {
  private count = 0;

  /** Runs `work` counted as one job in hand until it settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    this.count += 1;
    try {
      return await work();
    } finally {
      this.count -= 1;
    }
  }

  get size(): number {
    return this.count;
  }
}

export interface WorkerStopParts {
  /** BullMQ's close without force: takes no more jobs, waits for those held (the normal path). */
  close(): Promise<unknown>;
  jobs: Pick<JobsInHand, 'size'>;
  /** Whether the worker's Redis answers now (the ioredis client's status is 'ready'). */
  redisReady(): boolean;
}

/** How often a stop looks again at the jobs in hand and at Redis while close() has not answered. */
export const WORKER_STOP_POLL_MS = 200;

/**
 * Looks in a row that must find Redis unreachable (2 s): a blip, such as a Sentinel failover
 * during a rollout, is not Redis gone. Stopped then, a fetch already blocked in Redis would
 * take a job once it is back and leave it locked and unstarted until its lock expired, counted
 * as a stall; close() hands such a job back untouched.
 */
export const WORKER_STOP_UNREACHABLE_LOOKS = 10;

/**
 * Resolves when `close()` has, or once no job has been in hand while Redis was unreachable for
 * WORKER_STOP_UNREACHABLE_LOOKS looks in a row, whichever comes first. A rejection of close() resolves it too: the worker takes no more jobs either way.
 */
export function stopWorker(parts: WorkerStopParts, pollMs = WORKER_STOP_POLL_MS): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearInterval(poll);
      resolve();
    };
    let unreachable = 0;
    const poll = setInterval(() => {
      unreachable = parts.jobs.size === 0 && !parts.redisReady() ? unreachable + 1 : 0;
      if (unreachable >= WORKER_STOP_UNREACHABLE_LOOKS) done();
    }, pollMs);
    poll.unref();
    parts.close().then(done, done);
  });
}
