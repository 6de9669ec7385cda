// A background job whose group ended unseen (its watchdog killed with it, so no `group-ended`),
// and whose pid another process group got since: bash_kill and bash_output past the cap leave
// that group alone. The pid is reused for real where the test may choose the next pid (root);
// elsewhere the job's pid file is pointed at the other group, which is what a reuse looks like.
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLive, processEntryOf } from '../../sandbox-image/toolbox/process-table.ts';
import { callTool, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

const CAP = 100_000;
const capped = { extraArgs: ['--output-log-max-bytes', String(CAP)] };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const canChooseNextPid = (() => {
  try {
    accessSync('/proc/sys/kernel/ns_last_pid', constants.W_OK);
    return true;
  } catch {
    return false;
  }
})();

let workspace: Workspace;
const others: ChildProcess[] = [];
const strays: number[] = [];
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => {
  for (const child of others.splice(0)) signalGroup(child.pid!, 'SIGKILL');
  for (const pid of strays.splice(0)) signal(pid, 'SIGKILL');
  workspace.cleanup();
});

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone.
  }
}
function signalGroup(pgid: number, name: NodeJS.Signals): void {
  signal(-pgid, name);
}
function runs(pid: number): boolean {
  const found = processEntryOf(pid);
  return found !== undefined && isLive(found);
}
const jobFile = (job: string, name: string) => path.join(workspace.home, 'jobs', job, name);

/** Starts `sleep 300` as a job, then kills its watchdog and its group, as `kill -9 -1` would: no `group-ended`. */
async function jobGoneUnseen(): Promise<{ job: string; pid: number }> {
  const { job } = resultOf<{ job: string }>(await callTool(workspace, 'bash', { command: 'sleep 300', background: true }, capped));
  const pid = Number(readFileSync(jobFile(job, 'pid'), 'utf8'));
  // The watchdog: in the job's session, the leader of a group of its own.
  let watchdogs: number[] = [];
  for (let attempt = 0; attempt < 100 && watchdogs.length === 0; attempt += 1) {
    await sleep(50);
    watchdogs = readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map(Number)
      .filter((candidate) => {
        const found = processEntryOf(candidate);
        return found?.session === pid && found.pgid === candidate && candidate !== pid;
      });
  }
  expect(watchdogs).toHaveLength(1);
  signal(watchdogs[0]!, 'SIGKILL');
  signalGroup(pid, 'SIGKILL');
  for (let attempt = 0; attempt < 100 && processEntryOf(pid) !== undefined; attempt += 1) await sleep(50);
  expect(processEntryOf(pid)).toBeUndefined();
  expect(existsSync(jobFile(job, 'group-ended'))).toBe(false);
  return { job, pid };
}

/** Starts `script` in a new process group and session whose id is `pid` (or, not root, points the job at it). */
async function otherGroupAt(job: string, pid: number, script: string): Promise<number> {
  for (let attempt = 0; attempt < (canChooseNextPid ? 200 : 1); attempt += 1) {
    if (canChooseNextPid) writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1));
    const candidate = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
    if (!canChooseNextPid || candidate.pid === pid) {
      others.push(candidate);
      if (!canChooseNextPid) writeFileSync(jobFile(job, 'pid'), String(candidate.pid));
      return candidate.pid!;
    }
    candidate.kill('SIGKILL');
    await sleep(20);
  }
  throw new Error(`pid ${pid} never came round again`);
}

describe('a job whose group ended unseen and whose pid another group has now', () => {
  it('bash_kill leaves the other group alone and says the job is lost', async () => {
    const { job, pid } = await jobGoneUnseen();
    const other = await otherGroupAt(job, pid, 'sleep 300');
    expect(resultOf(await callTool(workspace, 'bash_kill', { job }, capped))).toEqual({ job, status: 'lost' });
    await sleep(200);
    expect(runs(other)).toBe(true);
  });

  it('bash_kill leaves alone the other group once its leader exited and a member still runs', async () => {
    const { job, pid } = await jobGoneUnseen();
    const other = await otherGroupAt(job, pid, `sleep 300 & echo $! > ${workspace.root}/member.pid; sleep 0.3`);
    await sleep(600);
    const member = Number(readFileSync(`${workspace.root}/member.pid`, 'utf8'));
    strays.push(member);
    expect(runs(other)).toBe(false);
    expect(processEntryOf(member)?.pgid).toBe(other);
    expect(resultOf(await callTool(workspace, 'bash_kill', { job }, capped))).toEqual({ job, status: 'lost' });
    await sleep(200);
    expect(runs(member)).toBe(true);
  });

  it('bash_output past the cap caps the job without signalling the other group', async () => {
    const { job, pid } = await jobGoneUnseen();
    const other = await otherGroupAt(job, pid, 'sleep 300');
    writeFileSync(jobFile(job, 'output.log'), Buffer.alloc(CAP + 1000, 0x61));
    expect(resultOf(await callTool(workspace, 'bash_output', { job }, capped))).toMatchObject({ size: CAP, outputCapped: true });
    await sleep(200);
    expect(runs(other)).toBe(true);
  });
});
