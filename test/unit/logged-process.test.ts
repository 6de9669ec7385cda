// The test harness's process handle (test/support/logged-process.ts): a process that does not
// end on SIGTERM (Node can deadlock in its own exit, nodejs/node#54918) is killed after the
// grace period, so a test neither hangs on it nor leaves it running.
import { describe, expect, it } from 'vitest';
import { LoggedProcess } from '../support/logged-process.ts';

const start = (script: string) =>
  new LoggedProcess('test process', ['-e', script], { cwd: process.cwd(), env: { PATH: process.env.PATH ?? '' } });

describe('LoggedProcess.kill', () => {
  it('returns the exit code of a process that ends on SIGTERM', async () => {
    const child = start(
      `process.on('SIGTERM', () => process.exit(3)); console.log(JSON.stringify({ msg: 'up' })); setInterval(() => {}, 1000);`,
    );
    await child.waitForLog('up');
    expect(await child.kill('SIGTERM', 10_000)).toBe(3);
  });

  it('kills a process that ignores SIGTERM once the grace period is over', async () => {
    const child = start(`process.on('SIGTERM', () => {}); console.log(JSON.stringify({ msg: 'up' })); setInterval(() => {}, 1000);`);
    await child.waitForLog('up');
    // null: it ended by a signal (SIGKILL), not with a code of its own.
    expect(await child.kill('SIGTERM', 300)).toBeNull();
    expect(() => process.kill(child.pid, 0)).toThrow();
  });
});
