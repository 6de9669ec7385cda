// A Redis call the controller awaits, bounded. ioredis queues a command while it reconnects
// (the workers' connections retry without limit, as BullMQ needs), so a call made while Redis is
// down waits until it is back: a reconcile waiting on one holds one of the controller's few
// reconcile slots, and four of them (the default reconcileConcurrency) stopped every run's
// reconcile (no phase, no finalizer removed, no deadline) until Redis returned.

/** No answer in time: the caller fails this try (a reconcile backs off and tries again). */
export class NoAnswerError extends Error {
  constructor(what: string, ms: number) {
    super(`${what}: no answer from Redis within ${ms} ms`);
  }
}

/**
 * `call`'s answer, or a NoAnswerError after `ms`. The call itself is not cancelled (Redis has
 * no way to): it may still land later, so only idempotent calls are bounded this way.
 */
export async function answerWithin<T>(call: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NoAnswerError(what, ms)), ms);
  });
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}
