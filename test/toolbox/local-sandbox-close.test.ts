// The local sandbox's close stops the background jobs recorded under the home, which code in
// the sandbox can write too. It runs in the operator's (or the CLI's) own process, so a pid
// file replaced by a FIFO or a symlink to /dev/zero must neither hold it nor be read to its end.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, mkdirSync, openSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { alive, makeWorkspace, openSession, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Opens a session, starts a real background job, plants a job directory whose pid file `plant`
 * makes, and closes: whether close answered within 3 s, whether the real job survived, and how
 * far this process's peak memory rose meanwhile (reading /dev/zero to the end is 2 GiB).
 */
async function closeWithPlantedPid(
  plant: (pidFile: string) => void,
): Promise<{ closed: boolean; jobAlive: boolean; peakGrowthMiB: number }> {
  const session = await openSession(workspace);
  const { job } = resultOf<{ job: string }>(await session.call({ tool: 'bash', input: { command: 'sleep 60', background: true } }));
  const jobPidFile = path.join(workspace.home, 'jobs', job, 'pid');
  for (let attempt = 0; attempt < 100 && !existsSync(jobPidFile); attempt += 1) await sleep(50);
  const jobPid = Number(readFileSync(jobPidFile, 'utf8'));
  const planted = path.join(workspace.home, 'jobs', 'job-planted', 'pid');
  mkdirSync(path.dirname(planted));
  plant(planted);
  const peakKiB = process.resourceUsage().maxRSS;
  try {
    const closed = await Promise.race([session.close().then(() => true), sleep(3_000).then(() => false)]);
    const peakGrowthMiB = Math.round((process.resourceUsage().maxRSS - peakKiB) / 1024);
    await sleep(100);
    return { closed, jobAlive: alive(jobPid), peakGrowthMiB };
  } finally {
    // When close waits on the FIFO (the bug), a writer that comes and goes lets it go on.
    try {
      closeSync(openSync(planted, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // No reader waiting: close did not open it.
    }
    try {
      process.kill(-jobPid, 'SIGKILL');
    } catch {
      // Stopped by close, as it should be.
    }
  }
}

describe('local sandbox close', () => {
  it('answers promptly when a job pid file is a FIFO, and still stops the real jobs', async () => {
    const result = await closeWithPlantedPid((pidFile) => execFileSync('mkfifo', [pidFile]));
    expect(result).toMatchObject({ closed: true, jobAlive: false });
  });

  it('does not read a job pid file that is a symlink to /dev/zero, and still stops the real jobs', async () => {
    const result = await closeWithPlantedPid((pidFile) => symlinkSync('/dev/zero', pidFile));
    expect(result).toMatchObject({ closed: true, jobAlive: false });
    expect(result.peakGrowthMiB).toBeLessThan(64);
  });
});
