// bash_output at the cap of a background job whose watchdog has not capped it (between two of its
// polls, or stopped by code in the sandbox): it caps the job as the watchdog would, and every later
// call reads the same state.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLive, parseStat } from '../../sandbox-image/toolbox/process-table.ts';
import { callTool, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

interface JobOutput {
  status: string;
  exitCode?: number | null;
  size: number;
  outputCapped: boolean;
}

const CAP = 100_000;
const capped = { extraArgs: ['--output-log-max-bytes', String(CAP)] };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let workspace: Workspace;
/** Watchdogs a test stopped, resumed (and so left to exit) whatever the test found. */
const stopped: number[] = [];
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => {
  for (const pid of stopped.splice(0)) signal(pid, 'SIGCONT');
  workspace.cleanup();
});

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone.
  }
}

const output = async (job: string) => resultOf<JobOutput>(await callTool(workspace, 'bash_output', { job }, capped));
const jobFile = (job: string, name: string) => path.join(workspace.home, 'jobs', job, name);

/** The live processes of a process group, read from /proc. */
function liveInGroup(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .flatMap((name) => {
      try {
        const entry = parseStat(readFileSync(`/proc/${name}/stat`, 'utf8'));
        return entry && entry.pgid === pgid && isLive(entry) ? [entry.pid] : [];
      } catch {
        return [];
      }
    });
}

/**
 * Starts a background job and stops its watchdog (SIGSTOP) before the command writes anything:
 * the watchdog is the shell whose command line names the job's directory outside the job's group.
 */
async function startWithWatchdogStopped(command: string): Promise<{ job: string; pid: number }> {
  const { job } = resultOf<{ job: string }>(
    await callTool(workspace, 'bash', { command: `sleep 1; ${command}`, background: true }, capped),
  );
  const directory = path.join(workspace.home, 'jobs', job);
  const pid = Number(readFileSync(jobFile(job, 'pid'), 'utf8'));
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const watchdogs = readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .filter((name) => {
        try {
          const entry = parseStat(readFileSync(`/proc/${name}/stat`, 'utf8'));
          return entry?.pgid !== pid && readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').includes(directory);
        } catch {
          return false;
        }
      })
      .map(Number);
    if (watchdogs.length > 0) {
      for (const watchdog of watchdogs) {
        signal(watchdog, 'SIGSTOP');
        stopped.push(watchdog);
      }
      return { job, pid };
    }
    await sleep(20);
  }
  throw new Error(`no watchdog found for ${job}`);
}

async function waitForLogPast(job: string, bytes: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    if (statSync(jobFile(job, 'output.log')).size > bytes) return;
    await sleep(50);
  }
  throw new Error(`the output of ${job} never passed ${bytes} bytes`);
}

describe('bash_output at the cap when the watchdog has not capped the job', () => {
  it('caps a running job whose output passed the cap: killed, outputCapped, log cut, on this call and every later one', async () => {
    const { job, pid } = await startWithWatchdogStopped('head -c 500000 /dev/zero; sleep 60');
    await waitForLogPast(job, CAP);
    expect(await output(job)).toMatchObject({ status: 'killed', exitCode: null, size: CAP, outputCapped: true });
    expect(liveInGroup(pid)).toEqual([]);
    expect(statSync(jobFile(job, 'output.log')).size).toBe(CAP);
    expect(await output(job)).toMatchObject({ status: 'killed', size: CAP, outputCapped: true });
  });

  it('keeps saying outputCapped on a later call after it cut the log of a job gone without an exit record', async () => {
    // The job writes past the cap and kills its own group (no exit record) before any watchdog poll.
    const { job } = await startWithWatchdogStopped('head -c 500000 /dev/zero; kill -9 0');
    await waitForLogPast(job, CAP);
    for (let attempt = 0; attempt < 100 && existsAlive(job); attempt += 1) await sleep(50);
    const first = await output(job);
    expect(first).toMatchObject({ size: CAP, outputCapped: true });
    expect(statSync(jobFile(job, 'output.log')).size).toBe(CAP);
    // The log is at the cap now, no longer past it: only the marker can say it was capped.
    expect(await output(job)).toMatchObject({ status: first.status, size: CAP, outputCapped: true });
  });
});

/** Whether the job's group still has a live process. */
function existsAlive(job: string): boolean {
  return liveInGroup(Number(readFileSync(jobFile(job, 'pid'), 'utf8'))).length > 0;
}
