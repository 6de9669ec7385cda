// A kept serve session whose toolbox was stopped from inside (`kill -STOP $PPID`, from a verify
// check or any bash the model wrote) answers nothing again: kept, every later call of the run
// waited out its own deadline in it too. A call that gets no answer within its deadline now
// discards the session (serve-session.ts): its process is ended and the next call starts a new
// one. The bundled toolbox as a real process, the transport counted.
import { describe, expect, it } from 'vitest';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { countedServeSandboxPerTest } from '../support/counted-serve-sandbox.ts';
import { makeWorkspace } from './toolbox-fixture.ts';

const serve = countedServeSandboxPerTest(makeWorkspace);

const bash = (command: string, timeoutMs?: number) =>
  serve.sandbox.call({ tool: 'bash', input: { command } }, timeoutMs === undefined ? {} : { timeoutMs });

/** Whether a process of this machine with this pid is still there (a stopped one is). */
const exists = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(condition: () => boolean, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return condition();
}

describe('a serve session whose toolbox was stopped from inside', () => {
  it('is discarded when a call times out in it, and the next call is answered by a new session', async () => {
    const before = await bash('echo $PPID');
    const stoppedPid = Number(before.ok && (before.result as { stdout: string }).stdout.trim());
    expect(stoppedPid).toBeGreaterThan(1);

    // The toolbox stops itself before it can answer: the call waits out its deadline.
    const stopped = await bash('kill -STOP $PPID; echo never', 1_500).catch((error: unknown) => error);
    expect(SandboxError.isInstance(stopped) && stopped.reason).toBe('TIMEOUT');

    const after = await bash('echo fresh; echo $PPID', 5_000);
    expect(after.ok && (after.result as { stdout: string }).stdout).toMatch(/^fresh\n\d+\n$/);
    const freshPid = Number((after.ok && (after.result as { stdout: string }).stdout.split('\n')[1]) || 0);
    expect(freshPid).not.toBe(stoppedPid);
    expect(serve.starts).toEqual(['serve', 'serve']);

    // The stopped session was ended, not left behind (a stopped process stays until it is killed).
    await expect(serve.processes[0]!.exited).resolves.toMatchObject({ code: null });
    expect(await until(() => !exists(stoppedPid), 5_000)).toBe(true);
  }, 20_000);
});
