// withDeadline (sandbox/call-deadline.ts) bounds a pending toolbox answer by the caller's
// AbortSignal and timeout. The work it gives up on fails afterwards (the toolbox is killed):
// that failure must never surface as an unhandled rejection, which would end the operator.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withDeadline } from '../../operator/src/sandbox/call-deadline.ts';

let unhandled: unknown[];
const record = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled = [];
  process.on('unhandledRejection', record);
});
afterEach(() => {
  process.off('unhandledRejection', record);
});

/** Work that fails as a killed toolbox's does: once given up on. */
function killableWork(): { work: Promise<string>; kill: () => void } {
  let kill = () => {};
  const work = new Promise<string>((_, reject) => {
    kill = () => setTimeout(() => reject(new Error('the toolbox exited (SIGKILL) without an answer')), 5);
  });
  return { work, kill: () => kill() };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe('withDeadline', () => {
  it('rejects ABORTED at once when the signal was aborted before the call, and the killed work fails unheeded', async () => {
    const { work, kill } = killableWork();
    const controller = new AbortController();
    controller.abort();
    let gaveUp = false;
    await expect(
      withDeadline(work, { signal: controller.signal }, 60_000, () => {
        gaveUp = true;
        kill();
      }),
    ).rejects.toMatchObject({ name: 'SandboxError', reason: 'ABORTED' });
    expect(gaveUp).toBe(true);
    await settle();
    expect(unhandled).toEqual([]);
  });

  it('rejects ABORTED when the signal aborts during the call, and the killed work fails unheeded', async () => {
    const { work, kill } = killableWork();
    const controller = new AbortController();
    const call = withDeadline(work, { signal: controller.signal }, 60_000, kill);
    controller.abort();
    await expect(call).rejects.toMatchObject({ reason: 'ABORTED' });
    await settle();
    expect(unhandled).toEqual([]);
  });

  it('rejects TIMEOUT after timeoutMs, and the killed work fails unheeded', async () => {
    const { work, kill } = killableWork();
    await expect(withDeadline(work, { timeoutMs: 10 }, 60_000, kill)).rejects.toMatchObject({ reason: 'TIMEOUT' });
    await settle();
    expect(unhandled).toEqual([]);
  });

  it('passes the answer through when it comes in time', async () => {
    await expect(withDeadline(Promise.resolve('answer'), { timeoutMs: 1_000 }, 60_000, () => {})).resolves.toBe('answer');
  });
});
