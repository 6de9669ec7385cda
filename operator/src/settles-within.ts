// Waiting for work at most so long, without cancelling it: a shutdown's bounded waits
// (shutdown-sequence.ts, main.ts) and a one-shot toolbox call's grace for the rest of its
// archive (sandbox/one-shot-call.ts). The timer is unref'd: a wait alone never holds the process.

/** Whether `promise` settled (resolved or rejected) within `ms`; a rejection is taken, never left unhandled. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
  return settled;
}
