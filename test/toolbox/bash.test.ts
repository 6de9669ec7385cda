// bash, bash_output and bash_kill: persisted state, process groups, timeouts that kill the
// whole tree, head/tail with full logs, the output cap, and background jobs that outlive the
// `call` process that started them.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BASH_GROUP_LIVES } from '../../sandbox-image/toolbox/bash-script.ts';
import { BASH_HEAD_BYTES, BASH_TAIL_BYTES } from '../../sandbox-image/toolbox/contract/limits.ts';
import type { ToolResponse } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { isLive, parseStat } from '../../sandbox-image/toolbox/process-table.ts';
import { mainThreadExitBinary, mainThreadExitUnavailable } from './main-thread-exit-binary.ts';
import { alive, callTool, errorCodeOf, makeWorkspace, openSession, resultOf, type Workspace } from './toolbox-fixture.ts';

interface Bash {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stdoutBytes: number;
  stdoutLog: string;
  stderrLog: string;
  cwd: string;
  outputCapped: boolean;
  timedOut: boolean;
  durationMs: number;
}

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

const bash = async (input: Record<string, unknown>, options: Parameters<typeof callTool>[3] = {}) =>
  resultOf<Bash>(await callTool(workspace, 'bash', input, options));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Root in a pid namespace may choose the next pid: the way to show what a reused pid does. */
const canChooseNextPid = (() => {
  try {
    accessSync('/proc/sys/kernel/ns_last_pid', constants.W_OK);
    return true;
  } catch {
    return false;
  }
})();
/**
 * Whether a process runs, a process whose main thread exited included (/proc shows it as Z, with
 * threads left): the fixture's alive() takes every Z for dead.
 */
function runs(pid: number): boolean {
  try {
    const entry = parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    return entry !== undefined && isLive(entry);
  } catch {
    return false;
  }
}
/** Waits, a while at most, until the process no longer runs. */
async function stopsRunning(pid: number, withinMs = 3_000): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (runs(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}
/** The program whose main thread exits while a thread writes 4 KiB every 10 ms and ignores SIGTERM (x86-64 Linux only). */
const NO_MAIN_THREAD_EXIT = mainThreadExitUnavailable();
const MAIN_THREAD_EXIT = NO_MAIN_THREAD_EXIT === undefined ? mainThreadExitBinary() : undefined;
/** Puts that program in the workspace as ./mte. */
function writeMainThreadExit(root: string): void {
  writeFileSync(path.join(root, 'mte'), MAIN_THREAD_EXIT!);
  chmodSync(path.join(root, 'mte'), 0o755);
}
/** Kills a pid the test started, if it still runs. */
function killIfRunning(pid: number): void {
  try {
    if (pid > 0) process.kill(pid, 'SIGKILL');
  } catch {
    // Gone.
  }
}
/**
 * Prefixed to a leftover's commands so that it writes only once the command's shell is gone (kill -0
 * fails once the toolbox has reaped it): one that writes while the shell still runs can pass the cap
 * before the shell exits (on a loaded machine the shell may wait long for the CPU), and then the
 * call's cap watch kills the whole group as the command's own kill, not the leftover's kill under test.
 */
const ONCE_THE_SHELL_IS_GONE = 'while kill -0 $$ 2>/dev/null; do :; done';
/** Long enough for a SIGKILLed process to be gone on a loaded machine; the wait ends as soon as it is. */
const GONE_WITHIN_MS = 20_000;
/** Whether a process group is gone, waited for a while: killed processes linger as zombies until reaped. */
async function groupGone(pgid: number, withinMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return true;
    }
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

describe('bash', () => {
  it('keeps the working directory and exported variables across separate call processes', async () => {
    workspace.write({ 'pkg/a/file': '' });
    const first = await bash({ command: 'cd pkg/a && export GREETING="hello world" && NOT_EXPORTED=1' });
    expect(first).toMatchObject({ exitCode: 0, cwd: 'pkg/a' });
    const second = await bash({ command: 'echo "$GREETING|${NOT_EXPORTED:-unset}"; ls' });
    expect(second).toMatchObject({ stdout: 'hello world|unset\nfile\n', cwd: 'pkg/a' });
  });

  it('keeps the state when the command exits with a status, and reports that status', async () => {
    const result = await bash({ command: 'mkdir -p x && cd x && export CODE=9 && exit 3' });
    expect(result).toMatchObject({ exitCode: 3, cwd: 'x' });
    expect((await bash({ command: 'echo $CODE' })).stdout).toBe('9\n');
  });

  // On a real node the workspace is an emptyDir the kubelet made as root while the toolbox runs
  // as uid 1000; git refuses such a repository unless told it is safe (found on the real node,
  // where the import check, the model's git commands and finalize's diff all failed).
  it.skipIf(process.getuid?.() !== 0)('runs git in a workspace another uid owns, as on a real node', async () => {
    workspace.write({ 'a.txt': 'a\n' });
    workspace.git('init', '-q');
    workspace.git('add', '.');
    workspace.git('commit', '-qm', 'first');
    chownSync(workspace.root, 4321, 4321);
    // The control: git itself refuses the repository now.
    expect(() => execFileSync('git', ['rev-parse', '--verify', 'HEAD'], { cwd: workspace.root, stdio: 'pipe' })).toThrow(
      /dubious ownership/,
    );
    const result = await bash({ command: 'git rev-parse --verify -q HEAD >/dev/null && echo > b.txt && git status --short' });
    expect(result).toMatchObject({ exitCode: 0, stdout: '?? b.txt\n' });
    const job = await callTool(workspace, 'bash', {
      command: 'git rev-parse --verify -q HEAD >/dev/null && echo job-ok',
      background: true,
    });
    const id = resultOf<{ job: string }>(job).job;
    let output = '';
    for (let attempt = 0; attempt < 100 && !output.includes('job-ok'); attempt += 1) {
      await sleep(50);
      output = resultOf<{ output: string }>(await callTool(workspace, 'bash_output', { job: id })).output;
    }
    expect(output).toBe('job-ok\n');
  });

  it('runs in cwd when given, and refuses a cwd outside the workspace', async () => {
    workspace.write({ 'sub/f': '' });
    expect((await bash({ command: 'pwd', cwd: 'sub' })).stdout.trim()).toMatch(/\/workspace\/sub$/);
    expect(errorCodeOf(await callTool(workspace, 'bash', { command: 'pwd', cwd: '../' }))).toBe('OUTSIDE_WORKSPACE');
  });

  it('runs each command in its own process group', async () => {
    const result = await bash({ command: 'echo "$$ $(ps -o pgid= -p $$)"' });
    const [pid, pgid] = result.stdout.trim().split(/\s+/);
    expect(pgid).toBe(pid);
    expect(Number(pgid)).not.toBe(process.pid);
  });

  it('kills the whole process tree on timeout', async () => {
    const started = Date.now();
    const result = await bash({ command: '(sleep 30 & echo $! > grandchild.pid; wait) & sleep 30', timeoutMs: 500 });
    expect(result).toMatchObject({ timedOut: true, exitCode: null });
    expect(Date.now() - started).toBeLessThan(10_000);
    const grandchild = Number(readFileSync(`${workspace.root}/grandchild.pid`, 'utf8'));
    await sleep(100);
    expect(alive(grandchild)).toBe(false);
  });

  it('shows the first 8 KiB and the last 24 KiB of a long stream, the whole of it in a log read_file can open', async () => {
    const result = await bash({ command: 'seq 1 100000' });
    expect(result.stdoutTruncated).toBe(true);
    expect(result.stdoutBytes).toBe(588_895);
    expect(result.stdout.startsWith('1\n2\n3\n')).toBe(true);
    expect(result.stdout.endsWith('99999\n100000\n')).toBe(true);
    expect(Buffer.byteLength(result.stdout)).toBeLessThan(BASH_HEAD_BYTES + BASH_TAIL_BYTES + 200);
    expect(readFileSync(result.stdoutLog, 'utf8')).toBe(Array.from({ length: 100_000 }, (_, index) => `${index + 1}\n`).join(''));
    const log = resultOf<{ content: string; totalLines: number }>(
      await callTool(workspace, 'read_file', { path: result.stdoutLog, offset: 50_000, limit: 2 }),
    );
    expect(log).toMatchObject({ content: '50000\n50001', totalLines: 100_000 });
    expect(log).not.toHaveProperty('instructions');
  });

  it('separates stderr from stdout', async () => {
    expect(await bash({ command: 'echo out; echo err >&2' })).toMatchObject({ stdout: 'out\n', stderr: 'err\n' });
  });

  it('kills a command whose output passes the cap and says outputCapped (cap lowered for the test)', async () => {
    const started = Date.now();
    const result = await bash({ command: 'yes chamvi' }, { extraArgs: ['--output-log-max-bytes', String(256 * 1024)] });
    expect(result).toMatchObject({ outputCapped: true, exitCode: null, timedOut: false, stdoutBytes: 256 * 1024 });
    expect(Date.now() - started).toBeLessThan(10_000);
    const env = await bash({ command: 'yes chamvi >&2' }, { env: { ...process.env, CHAMVI_OUTPUT_LOG_MAX_BYTES: '100000' } });
    expect(env).toMatchObject({ outputCapped: true, stderrBytes: 100_000 });
  });

  it('leaves running what the command left with its output open, and says its log is no longer shown and capped only later', async () => {
    // stdout sent elsewhere, stderr still the call's log: a server started the honest way.
    const capped = { extraArgs: ['--output-log-max-bytes', '100000'] };
    const result = await bash({ command: 'sleep 30 > /dev/null & echo $!' }, capped);
    const pid = Number(result.stdout.trim());
    try {
      expect(result).toMatchObject({ exitCode: 0, outputCapped: false, timedOut: false });
      expect(result.stderr).toMatch(
        /^\n\[chamvi: 1 process this command started is still running with its output open: .*no longer shown, and it is stopped at a later bash command once the log has passed the cap\..*background: true.*2>&1\)\.\]\n$/,
      );
      await sleep(200);
      expect(alive(pid)).toBe(true);
    } finally {
      process.kill(pid, 'SIGKILL');
    }
  });

  it('kills what the command left writing to its log once the log passes the cap, and says it was stopped', async () => {
    const cap = 1_048_576;
    const capped = { extraArgs: ['--output-log-max-bytes', String(cap)] };
    // Its output sent elsewhere: under the cap, left running as any honest leftover.
    const quiet = await bash({ command: 'yes > /dev/null & echo $!' }, capped);
    const quietPid = Number(quiet.stdout.trim());
    let loudPid = 0;
    try {
      expect(quiet).toMatchObject({ exitCode: 0, outputCapped: false });
      // The subshell itself writes, 64 KiB a builtin printf, from when the shell is gone.
      const loud = await bash({ command: `{ ${ONCE_THE_SHELL_IS_GONE}; while :; do printf '%065536d' 0; done; } & echo $! >&2` }, capped);
      loudPid = Number(loud.stderr.split('\n')[0]);
      expect(loud).toMatchObject({ exitCode: 0, outputCapped: true, timedOut: false });
      expect(loud.stderr).toMatch(
        /\[chamvi: 1 process this command left running was stopped because its output passed the cap of 1048576 bytes\./,
      );
      expect(loud.stderr).not.toMatch(/still running/);
      // SIGKILL is sent before the call answers; the process ends when the scheduler next runs it.
      expect(await stopsRunning(loudPid, GONE_WITHIN_MS)).toBe(true);
      // Nothing else writes the log: once the writer is gone its size is final.
      expect(statSync(loud.stdoutLog).size).toBeLessThanOrEqual(4 * cap);
      expect(alive(quietPid)).toBe(true);
    } finally {
      killIfRunning(quietPid);
      killIfRunning(loudPid);
    }
  });

  it('kills a leftover whose main thread exited (Z in /proc, a thread still writing) once its output passes the cap', async ({ skip }) => {
    skip(!MAIN_THREAD_EXIT, NO_MAIN_THREAD_EXIT ?? '');
    writeMainThreadExit(workspace.root);
    // Five of its 4 KiB blocks: past the cap soon after it starts, while the call still waits for it.
    const capped = { extraArgs: ['--output-log-max-bytes', '20000'] };
    // What passes the cap is the leftover's output, written after the shell exited (exec keeps the pid).
    const pidFile = path.join(workspace.root, 'mte.pid');
    let pid = 0;
    try {
      const result = await bash({ command: `{ ${ONCE_THE_SHELL_IS_GONE}; exec ./mte; } & echo $! > mte.pid` }, capped);
      pid = Number(readFileSync(pidFile, 'utf8'));
      expect(result).toMatchObject({ exitCode: 0, outputCapped: true, timedOut: false });
      expect(result.stderr).toMatch(/\[chamvi: 1 process this command left running was stopped because its output passed the cap/);
      expect(await stopsRunning(pid, GONE_WITHIN_MS)).toBe(true);
    } finally {
      // The program ignores SIGTERM and writes for good: whatever threw, kill it once its pid is known.
      killIfRunning(pid || Number(existsSync(pidFile) ? readFileSync(pidFile, 'utf8') : 0));
    }
  });

  it('kills a leftover that left the process group (setsid) once its output passes the cap', async () => {
    const cap = 2_000_000;
    const capped = { extraArgs: ['--output-log-max-bytes', String(cap)] };
    const result = await bash(
      { command: "setsid bash -c 'for i in $(seq 40); do head -c 1000000 /dev/zero; sleep 0.1; done' & echo $! > writer.pid; sleep 5" },
      capped,
    );
    const pid = Number(readFileSync(path.join(workspace.root, 'writer.pid'), 'utf8'));
    try {
      expect(result).toMatchObject({ outputCapped: true, exitCode: null, stdoutBytes: cap });
      expect(result.stderr).toMatch(/\[chamvi: \d+ process(es)? this command left running (was|were) stopped because/);
      expect(result.stderr).not.toMatch(/still running/);
      expect(await stopsRunning(pid)).toBe(true);
      await sleep(500);
      expect(statSync(result.stdoutLog).size).toBe(cap);
    } finally {
      killIfRunning(pid);
    }
  });

  it('leaves running a setsid daemon under the cap that holds the output, and says so', async () => {
    const result = await bash({ command: 'setsid sleep 30 & echo $!' });
    const pid = Number(result.stdout.trim());
    try {
      expect(result).toMatchObject({ exitCode: 0, outputCapped: false });
      expect(result.stderr).toMatch(/^\n\[chamvi: 1 process this command started is still running with its output open/);
      expect(runs(pid)).toBe(true);
    } finally {
      killIfRunning(pid);
    }
  });

  it('stops at the next command what an earlier command left writing to its log once that log passed the cap', async () => {
    const cap = 1_000_000;
    const capped = { extraArgs: ['--output-log-max-bytes', String(cap)] };
    // Quiet when the call answers: left running with a note; past the cap a moment later.
    // The subshell itself writes (printf is a builtin): only a holder that writes is a writer.
    const first = await bash({ command: "(sleep 1; while :; do printf '%0100000d' 0; sleep 0.05; done) & echo $!" }, capped);
    const pid = Number(first.stdout.trim());
    try {
      expect(first).toMatchObject({ exitCode: 0, outputCapped: false });
      expect(first.stderr).toMatch(/still running with its output open/);
      for (let attempt = 0; attempt < 100 && statSync(first.stdoutLog).size <= cap; attempt += 1) await sleep(50);
      expect(statSync(first.stdoutLog).size).toBeGreaterThan(cap);
      const next = await bash({ command: 'echo next' }, capped);
      expect(next).toMatchObject({ exitCode: 0, stdout: 'next\n', outputCapped: false });
      expect(next.stderr).toMatch(
        new RegExp(
          `\\[chamvi: \\d+ process(es)? an earlier command left running (was|were) stopped: that command.s log passed the cap of ${cap} bytes`,
        ),
      );
      expect(await stopsRunning(pid)).toBe(true);
      expect(statSync(first.stdoutLog).size).toBe(cap);
    } finally {
      killIfRunning(pid);
    }
  });

  it('at the next command cuts an earlier log past the cap and stops a loop whose children write it in bursts', async () => {
    // The loop's shell holds the log and never writes itself; its children do, now and then: a
    // holder judged by whether it wrote lately was spared, and the log grew on (sparse) past the cut.
    const cap = 1_000_000;
    const capped = { extraArgs: ['--output-log-max-bytes', String(cap)] };
    const first = await bash({ command: "bash -c 'sleep 3; while :; do head -c 3000000 /dev/zero; sleep 2; done' & echo $!" }, capped);
    const loopPid = Number(first.stdout.split('\n')[0]);
    try {
      for (let attempt = 0; attempt < 200 && statSync(first.stdoutLog).size <= cap; attempt += 1) await sleep(50);
      expect(statSync(first.stdoutLog).size).toBeGreaterThan(cap);
      const next = await bash({ command: 'echo hi' }, capped);
      expect(next).toMatchObject({ exitCode: 0, stdout: 'hi\n' });
      expect(statSync(first.stdoutLog).size).toBe(cap);
      await sleep(200);
      expect(runs(loopPid)).toBe(false);
      await sleep(2_500);
      expect(statSync(first.stdoutLog).size).toBe(cap);
    } finally {
      killIfRunning(loopPid);
    }
  });

  it('shows all a process substitution writes after the shell exited, and no note once it finished', async () => {
    const result = await bash({ command: 'seq 1 20000 > >(while read -r line; do echo "[build] $line"; done)' });
    expect(result).toMatchObject({ exitCode: 0, stderr: '' });
    expect(result.stdout.endsWith('[build] 19999\n[build] 20000\n')).toBe(true);
    expect(readFileSync(result.stdoutLog, 'utf8').split('\n')).toHaveLength(20_001);
  });

  it('leaves running what the command left with its output sent elsewhere, and says nothing', async () => {
    const result = await bash({ command: 'sleep 30 > /dev/null 2>&1 & echo $!' });
    const pid = Number(result.stdout.trim());
    try {
      expect(result.stderr).toBe('');
      await sleep(200);
      expect(alive(pid)).toBe(true);
    } finally {
      process.kill(pid, 'SIGKILL');
    }
  });

  it('answers many instant commands in a row (an exit during setup is not missed)', async () => {
    const session = await openSession(workspace);
    try {
      for (let index = 0; index < 100; index += 1) {
        const response = await session.call({ tool: 'bash', input: { command: 'true' } }, { timeoutMs: 5_000 });
        expect(response.ok).toBe(true);
      }
    } finally {
      await session.close();
    }
  });

  it('keeps the logs of the last 200 commands only', async () => {
    const session = await openSession(workspace);
    try {
      const first = resultOf<Bash>(await session.call({ tool: 'bash', input: { command: 'echo first' } }));
      for (let index = 0; index < 200; index += 1) await session.call({ tool: 'bash', input: { command: 'true' } });
      expect(readdirSync(`${workspace.home}/out`).length).toBeLessThanOrEqual(400);
      expect(errorCodeOf(await session.call({ tool: 'read_file', input: { path: first.stdoutLog } }))).toBe('NOT_FOUND');
    } finally {
      await session.close();
    }
  });

  it('caps at 64 MiB by default', async () => {
    const result = await bash({ command: 'yes chamvi' });
    expect(result).toMatchObject({ outputCapped: true, stdoutBytes: 64 * 1_048_576 });
  });

  it('refuses a log path outside the home log directories', async () => {
    expect(errorCodeOf(await callTool(workspace, 'read_file', { path: `${workspace.home}/bash/state.sh` }))).toBe('OUTSIDE_WORKSPACE');
  });
});

describe('background jobs', () => {
  interface JobOutput {
    status: string;
    exitCode?: number | null;
    output: string;
    offset: number;
    nextOffset: number;
    size: number;
    truncated: boolean;
    outputCapped: boolean;
  }
  const output = async (job: string, offset?: number, options: Parameters<typeof callTool>[3] = {}) =>
    resultOf<JobOutput>(await callTool(workspace, 'bash_output', offset === undefined ? { job } : { job, offset }, options));
  async function waitFor(job: string, status: string, options: Parameters<typeof callTool>[3] = {}): Promise<JobOutput> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const current = await output(job, undefined, options);
      if (current.status === status) return current;
      await sleep(100);
    }
    throw new Error(`job ${job} never reached ${status}`);
  }
  async function waitForCapped(job: string, options: Parameters<typeof callTool>[3] = {}): Promise<JobOutput> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const current = await output(job, undefined, options);
      if (current.outputCapped) return current;
      await sleep(100);
    }
    throw new Error(`the output of job ${job} was never capped`);
  }
  /** The pids of the processes whose command line names the job's directory: its wrapper and watchdog. */
  function jobShells(job: string): number[] {
    const directory = path.join(workspace.home, 'jobs', job);
    return readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .filter((name) => {
        try {
          return readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').includes(directory);
        } catch {
          return false;
        }
      })
      .map(Number)
      .filter(runs);
  }

  it('returns at once, outlives the call process, and reports output and exit code to a later call', async () => {
    const started = resultOf<{ job: string; status: string; outputLog: string }>(
      await callTool(workspace, 'bash', { command: 'echo started; sleep 1; echo finished; exit 4', background: true }),
    );
    expect(started).toMatchObject({ status: 'running', job: expect.stringMatching(/^job-/) });
    const running = await output(started.job);
    expect(running.status).toBe('running');
    const done = await waitFor(started.job, 'exited');
    expect(done).toMatchObject({ exitCode: 4, output: 'started\nfinished\n', nextOffset: 17, size: 17, truncated: false });
    expect((await output(started.job, 8)).output).toBe('finished\n');
    expect(readFileSync(started.outputLog, 'utf8')).toBe('started\nfinished\n');
  });

  it('reads at most 32 KiB per call from an offset', async () => {
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: 'head -c 100000 /dev/zero | tr "\\0" a', background: true }),
    );
    const done = await waitFor(job, 'exited');
    expect(done).toMatchObject({ offset: 0, nextOffset: 32 * 1024, size: 100_000, truncated: true });
    const last = await output(job, 96 * 1024);
    expect(last).toMatchObject({ nextOffset: 100_000, truncated: false });
  });

  it('bash_kill from a later call stops the job and everything it started', async () => {
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: 'sleep 60 & echo $! > child.pid; sleep 60', background: true }),
    );
    await sleep(300);
    const child = Number(readFileSync(`${workspace.root}/child.pid`, 'utf8'));
    expect(alive(child)).toBe(true);
    expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toMatchObject({ job, status: 'killed' });
    await sleep(100);
    expect(alive(child)).toBe(false);
    expect((await output(job)).status).toBe('killed');
  });

  it('bash_kill stops what a job left running after its shell exited, and the job keeps its exit code', async () => {
    const { job } = resultOf<{ job: string }>(await callTool(workspace, 'bash', { command: 'sleep 300 & exit 3', background: true }));
    expect(await waitFor(job, 'exited')).toMatchObject({ exitCode: 3 });
    const pgid = Number(readFileSync(path.join(workspace.home, 'jobs', job, 'pid'), 'utf8'));
    expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 3 });
    expect(await groupGone(pgid)).toBe(true);
    expect(await output(job)).toMatchObject({ status: 'exited', exitCode: 3 });
  });

  it('the watchdog marks the group ended once nothing of the job lives', async () => {
    const { job } = resultOf<{ job: string }>(await callTool(workspace, 'bash', { command: 'sleep 0.3 & echo started', background: true }));
    await waitFor(job, 'exited');
    const marker = path.join(workspace.home, 'jobs', job, 'group-ended');
    for (let attempt = 0; attempt < 50 && !existsSync(marker); attempt += 1) await sleep(100);
    expect(existsSync(marker)).toBe(true);
  });

  it('bash_kill stops a job that hands itself on from process to process, and its group is not marked ended meanwhile', async () => {
    // Each process forks its successor and exits: a scan of /proc can find none of them alive.
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: 'r(){ sleep 0.005; echo x >> relay.count; r & }; r', background: true }),
    );
    const pgid = Number(readFileSync(path.join(workspace.home, 'jobs', job, 'pid'), 'utf8'));
    const count = path.join(workspace.root, 'relay.count');
    try {
      expect(await waitFor(job, 'exited')).toMatchObject({ exitCode: 0 });
      await sleep(4_000);
      expect(existsSync(path.join(workspace.home, 'jobs', job, 'group-ended'))).toBe(false);
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      const after = statSync(count).size;
      await sleep(500);
      expect(statSync(count).size).toBe(after);
    } finally {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // Stopped.
      }
    }
  });

  it('bash_kill stops a relay that ignores SIGTERM, though a scan of /proc can miss it', async () => {
    // Each process forks its successor and exits, and SIGTERM is ignored: only SIGKILL stops it.
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: 'trap "" TERM; r(){ sleep 0.005; echo x >> relay.count; r & }; r', background: true }),
    );
    const pgid = Number(readFileSync(path.join(workspace.home, 'jobs', job, 'pid'), 'utf8'));
    const count = path.join(workspace.root, 'relay.count');
    try {
      expect(await waitFor(job, 'exited')).toMatchObject({ exitCode: 0 });
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      const after = statSync(count).size;
      await sleep(500);
      expect(statSync(count).size).toBe(after);
    } finally {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // Stopped.
      }
    }
  });

  it('a job whose leftover has a newline in its name is not marked ended while it writes, and bash_kill stops it', async () => {
    // Builtins only (a read that times out for a sleep), so nothing else of the job is left to see.
    workspace.write({ 'srv\nx': '#!/bin/bash\nexec 9<> wait.fifo\nwhile :; do echo x; read -t 0.1 -u 9; done\n' });
    chmodSync(path.join(workspace.root, 'srv\nx'), 0o755);
    execFileSync('mkfifo', [path.join(workspace.root, 'wait.fifo')]);
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: "./$'srv\\nx' & echo $! > srv.pid", background: true }),
    );
    await waitFor(job, 'exited');
    const pid = Number(readFileSync(path.join(workspace.root, 'srv.pid'), 'utf8'));
    try {
      expect(readFileSync(`/proc/${pid}/comm`, 'utf8')).toBe('srv\nx\n');
      await sleep(6_000);
      expect(existsSync(path.join(workspace.home, 'jobs', job, 'group-ended'))).toBe(false);
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      expect(await stopsRunning(pid)).toBe(true);
    } finally {
      killIfRunning(pid);
    }
  });

  it('a job whose leftover has only its main thread exited is not marked ended while it writes, and bash_kill stops it', async ({
    skip,
  }) => {
    skip(!MAIN_THREAD_EXIT, NO_MAIN_THREAD_EXIT ?? '');
    writeMainThreadExit(workspace.root);
    const pidFile = path.join(workspace.root, 'mte.pid');
    let pid = 0;
    try {
      const { job } = resultOf<{ job: string }>(
        await callTool(workspace, 'bash', { command: './mte & echo $! > mte.pid', background: true }),
      );
      await waitFor(job, 'exited');
      pid = Number(readFileSync(pidFile, 'utf8'));
      const log = path.join(workspace.home, 'jobs', job, 'output.log');
      expect(readFileSync(`/proc/${pid}/stat`, 'utf8')).toMatch(/\) Z /);
      await sleep(6_000);
      expect(existsSync(path.join(workspace.home, 'jobs', job, 'group-ended'))).toBe(false);
      const before = statSync(log).size;
      await sleep(200);
      expect(statSync(log).size).toBeGreaterThan(before);
      // It ignores SIGTERM: bash_kill must go on to SIGKILL.
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      expect(await stopsRunning(pid)).toBe(true);
    } finally {
      // The program ignores SIGTERM and writes for good: whatever threw, kill it once its pid is known.
      killIfRunning(pid || Number(existsSync(pidFile) ? readFileSync(pidFile, 'utf8') : 0));
    }
  });

  it('caps the output of what a job left running in another process group (setsid)', async () => {
    const capped = { extraArgs: ['--output-log-max-bytes', '100000'] };
    const { job } = resultOf<{ job: string }>(
      await callTool(
        workspace,
        'bash',
        { command: "setsid bash -c 'sleep 0.5; head -c 500000 /dev/zero; sleep 60' & echo $! > writer.pid", background: true },
        capped,
      ),
    );
    await waitFor(job, 'exited', capped);
    const pid = Number(readFileSync(path.join(workspace.root, 'writer.pid'), 'utf8'));
    try {
      expect(await waitForCapped(job, capped)).toMatchObject({ status: 'exited', exitCode: 0, size: 100_000 });
      expect(await stopsRunning(pid)).toBe(true);
    } finally {
      killIfRunning(pid);
    }
  });

  it('bash_kill stops what a job left running in another process group (setsid) that writes its log', async () => {
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', {
        command: "setsid bash -c 'while :; do echo x; sleep 0.2; done' & echo $! > daemon.pid",
        background: true,
      }),
    );
    await waitFor(job, 'exited');
    const pid = Number(readFileSync(path.join(workspace.root, 'daemon.pid'), 'utf8'));
    try {
      expect(runs(pid)).toBe(true);
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      expect(await stopsRunning(pid)).toBe(true);
    } finally {
      killIfRunning(pid);
    }
  });

  it('the clean shell marks ended a job whose group is gone after its watchdog was killed (as the sweep does)', async () => {
    const session = await openSession(workspace);
    try {
      const { job } = resultOf<{ job: string }>(await session.call({ tool: 'bash', input: { command: 'sleep 60', background: true } }));
      const directory = path.join(workspace.home, 'jobs', job);
      for (let attempt = 0; attempt < 100 && !existsSync(path.join(directory, 'pid')); attempt += 1) await sleep(50);
      const pgid = Number(readFileSync(path.join(directory, 'pid'), 'utf8'));
      // The watchdog: in the job's session (field 6), the leader of a group of its own (field 5;
      // its `sleep` is in that group too, not its leader). The wrapper may not have started it yet.
      const findWatchdogs = () =>
        readdirSync('/proc')
          .filter((name) => /^\d+$/.test(name))
          .filter((name) => {
            try {
              const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
              const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
              return Number(fields[3]) === pgid && Number(fields[2]) === Number(name) && Number(name) !== pgid;
            } catch {
              return false;
            }
          })
          .map(Number);
      let watchdogs = findWatchdogs();
      for (let attempt = 0; attempt < 100 && watchdogs.length === 0; attempt += 1) {
        await sleep(50);
        watchdogs = findWatchdogs();
      }
      expect(watchdogs).toHaveLength(1);
      process.kill(watchdogs[0]!, 'SIGKILL');
      process.kill(-pgid, 'SIGKILL');
      expect(await groupGone(pgid)).toBe(true);
      expect(existsSync(path.join(directory, 'group-ended'))).toBe(false);
      expect(resultOf<Bash>(await session.call({ tool: 'bash', input: { command: 'echo check' }, clean: true })).stdout).toBe('check\n');
      expect(existsSync(path.join(directory, 'group-ended'))).toBe(true);
    } finally {
      await session.close();
    }
  });

  it('bash_kill leaves alone what an exited job left running once the group is marked ended (its id may be reused)', async () => {
    const { job } = resultOf<{ job: string }>(
      // Its output sent elsewhere: a process of the group only, as one of someone else would be.
      await callTool(workspace, 'bash', { command: 'sleep 300 > /dev/null 2>&1 & echo $! > leftover.pid', background: true }),
    );
    await waitFor(job, 'exited');
    const leftover = Number(readFileSync(`${workspace.root}/leftover.pid`, 'utf8'));
    try {
      // Planted: stands for a group that ended and whose id a process of someone else now has.
      writeFileSync(path.join(workspace.home, 'jobs', job, 'group-ended'), '');
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      await sleep(200);
      expect(alive(leftover)).toBe(true);
    } finally {
      process.kill(leftover, 'SIGKILL');
    }
  });

  it.skipIf(!canChooseNextPid)('bash_kill of an exited job leaves alone an unrelated group that got its pid later', async () => {
    const { job } = resultOf<{ job: string }>(await callTool(workspace, 'bash', { command: 'echo done', background: true }));
    await waitFor(job, 'exited');
    const pid = Number(readFileSync(path.join(workspace.home, 'jobs', job, 'pid'), 'utf8'));
    // The pid is free once the job's processes and its watchdog are gone (it looks for writers of
    // the log for a second or so after the group ended); other tests take pids meanwhile.
    let unrelated: ChildProcess | undefined;
    for (let attempt = 0; attempt < 200 && !unrelated; attempt += 1) {
      writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1));
      const candidate = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
      if (candidate.pid === pid) unrelated = candidate;
      else {
        candidate.kill('SIGKILL');
        await sleep(50);
      }
    }
    expect(unrelated?.pid).toBe(pid);
    try {
      expect(resultOf(await callTool(workspace, 'bash_kill', { job }))).toEqual({ job, status: 'exited', exitCode: 0 });
      await sleep(200);
      expect(alive(pid)).toBe(true);
    } finally {
      unrelated?.kill('SIGKILL');
    }
  });

  it('keeps capping the output of what a job left running after its shell exited', async () => {
    const capped = { extraArgs: ['--output-log-max-bytes', '100000'] };
    const { job } = resultOf<{ job: string }>(
      await callTool(
        workspace,
        'bash',
        { command: '(sleep 0.5; head -c 500000 /dev/zero; sleep 60) & echo started', background: true },
        capped,
      ),
    );
    await waitFor(job, 'exited', capped);
    // The command's shell exited on its own with 0: capping what it left running does not change that.
    expect(await waitForCapped(job, capped)).toMatchObject({ status: 'exited', exitCode: 0, size: 100_000 });
    expect(statSync(path.join(workspace.home, 'jobs', job, 'output.log')).size).toBe(100_000);
  });

  it('a job that exited on its own keeps its exit code when its output passed the cap', async () => {
    const capped = { extraArgs: ['--output-log-max-bytes', '1000000'] };
    // The job's shell exits 7 at once; what it left behind passes the cap half a second later, so
    // the exit is recorded before the watchdog can cap anything (a job that writes past the cap
    // while it runs is, rightly, killed: a race a loaded machine would lose).
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: '(sleep 0.5; head -c 3000000 /dev/zero) & exit 7', background: true }, capped),
    );
    let seen = await output(job, 999_999, capped);
    for (let look = 0; look < 100 && seen.outputCapped !== true; look += 1) {
      await sleep(100);
      seen = await output(job, 999_999, capped);
    }
    expect(seen).toMatchObject({ status: 'exited', exitCode: 7, outputCapped: true });
  });

  it('the watchdog exits once the group ended and what holds the log writes nothing (setsid sleep)', async () => {
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: 'setsid sleep 30 & echo $! > daemon.pid', background: true }),
    );
    await waitFor(job, 'exited');
    const pid = Number(readFileSync(path.join(workspace.root, 'daemon.pid'), 'utf8'));
    try {
      await sleep(3_000);
      expect(runs(pid)).toBe(true);
      expect(jobShells(job)).toEqual([]);
    } finally {
      killIfRunning(pid);
    }
  });

  it('kills a job whose output passes the cap', async () => {
    // 1 MB and then quiet: past the configured 200 000 bytes, far below the 64 MiB default, so only the
    // configured cap kills it (under the default it would sleep on and never be 'killed').
    const capped = { extraArgs: ['--output-log-max-bytes', '200000'] };
    const { job } = resultOf<{ job: string }>(
      await callTool(workspace, 'bash', { command: 'yes chamvi | head -c 1000000; sleep 60', background: true }, capped),
    );
    const killed = await waitFor(job, 'killed', capped);
    expect(killed.outputCapped).toBe(true);
    expect(killed.size).toBe(200_000);
  });

  it('says JOB_NOT_FOUND for an unknown job', async () => {
    expect(errorCodeOf(await callTool(workspace, 'bash_output', { job: 'job-nope' }))).toBe('JOB_NOT_FOUND');
    expect(errorCodeOf(await callTool(workspace, 'bash_kill', { job: 'job-nope' }))).toBe('JOB_NOT_FOUND');
    expect(errorCodeOf(await callTool(workspace, 'bash_output', { job: '../etc' }))).toBe('INVALID_INPUT');
  });
});

// The watchdog of a background job runs while its group has a live process. Under a PID 1 that
// does not reap orphans, what the job left ends as zombies for good: they must not count.
describe("the job watchdog's liveness check", () => {
  const groupLives = (pgid: number): boolean => {
    try {
      execFileSync('bash', ['-c', `${BASH_GROUP_LIVES}\n__chamvi_group_lives "$1"`, 'check', String(pgid)], { stdio: 'ignore' });
      return true;
    } catch (error) {
      // 1: no process has the group id; 2: only zombies were seen.
      const status = (error as { status?: number }).status;
      if (status === 1 || status === 2) return false;
      throw error;
    }
  };
  /** Runs a shell that prints the pids it names on its first line, and returns them once printed. */
  async function startShell(script: string): Promise<{ shell: ChildProcess; pids: number[] }> {
    const shell = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'ignore'] });
    let text = '';
    for await (const chunk of shell.stdout!) {
      text += String(chunk);
      if (text.includes('\n')) break;
    }
    return { shell, pids: text.trim().split(' ').map(Number) };
  }

  it('counts a group with only zombies in it as ended, though kill -0 still finds it', async () => {
    // setsid makes the child a group of its own; it exits once its parent is sleep, which never reaps it.
    const { shell, pids } = await startShell(
      "setsid sh -c 'until grep -qx sleep /proc/$PPID/comm; do sleep 0.01; done' & echo $!; exec sleep 30",
    );
    const zombie = pids[0]!;
    try {
      for (let attempt = 0; attempt < 250 && !readFileSync(`/proc/${zombie}/stat`, 'utf8').includes(') Z '); attempt += 1) await sleep(20);
      expect(() => process.kill(-zombie, 0)).not.toThrow();
      expect(groupLives(zombie)).toBe(false);
    } finally {
      shell.kill('SIGKILL');
    }
  });

  it('counts a group whose leader exited but whose other process lives as live', async () => {
    const { shell, pids } = await startShell("setsid bash -c 'sleep 30 & echo $$ $!'");
    const [group, leftover] = pids as [number, number];
    try {
      for (let attempt = 0; attempt < 50 && alive(group); attempt += 1) await sleep(20);
      expect(alive(group)).toBe(false);
      expect(groupLives(group)).toBe(true);
    } finally {
      process.kill(leftover, 'SIGKILL');
    }
    for (let attempt = 0; attempt < 50 && alive(leftover); attempt += 1) await sleep(20);
    expect(groupLives(group)).toBe(false);
    shell.kill('SIGKILL');
  });

  it('counts a group whose only process has a newline in its name as live', async () => {
    // A copy of sleep: the command name /proc shows is the file's name, newline and all.
    const named = path.join(workspace.root, 'srv\nx');
    writeFileSync(named, readFileSync(execFileSync('bash', ['-c', 'command -v sleep'], { encoding: 'utf8' }).trim()));
    chmodSync(named, 0o755);
    const leader = spawn(named, ['30'], { detached: true, stdio: 'ignore' });
    try {
      for (let attempt = 0; attempt < 100 && !readFileSync(`/proc/${leader.pid}/stat`, 'utf8').includes('(srv\nx)'); attempt += 1)
        await sleep(20);
      expect(groupLives(leader.pid!)).toBe(true);
    } finally {
      leader.kill('SIGKILL');
    }
  });

  it('counts a group whose only process had its main thread exit (Z, a thread still running) as live', async ({ skip }) => {
    skip(!MAIN_THREAD_EXIT, NO_MAIN_THREAD_EXIT ?? '');
    writeMainThreadExit(workspace.root);
    const leader = spawn(path.join(workspace.root, 'mte'), [], { detached: true, stdio: 'ignore' });
    try {
      for (let attempt = 0; attempt < 100 && !readFileSync(`/proc/${leader.pid}/stat`, 'utf8').includes(') Z '); attempt += 1)
        await sleep(20);
      expect(readFileSync(`/proc/${leader.pid}/stat`, 'utf8')).toMatch(/\) Z /);
      expect(groupLives(leader.pid!)).toBe(true);
    } finally {
      leader.kill('SIGKILL');
    }
  });
});

// Code in the sandbox can write under the toolbox's home: the logs, the state file and the job
// files there may be replaced by a FIFO. A blocking open of one used to hold one of libuv's
// four threads for good (four of them stopped every tool), and the call never answered.
describe('files under the home that code in the sandbox replaced with a FIFO', () => {
  /** A serve session whose calls each have a deadline, so a toolbox that hangs fails the test instead of hanging it. */
  async function withSession(
    work: (call: (tool: string, input: Record<string, unknown>, clean?: boolean) => Promise<ToolResponse>) => Promise<void>,
  ) {
    const session = await openSession(workspace);
    try {
      await work((tool, input, clean) => session.call({ tool, input, ...(clean ? { clean } : {}) }, { timeoutMs: 5_000 }));
    } finally {
      await session.close();
    }
  }
  const fifoAt = (file: string) => {
    rmSync(file, { force: true });
    execFileSync('mkfifo', [file]);
  };

  it('bash answers when the command replaced its own output logs, and the next command runs', () =>
    withSession(async (call) => {
      const command = `echo hidden; echo hidden >&2; for log in "${workspace.home}"/out/*.log; do rm -f "$log"; mkfifo "$log"; done; exit 3`;
      const replaced = resultOf<Bash>(await call('bash', { command }));
      // Like a log the command deleted: nothing to show, the exit code still reported.
      expect(replaced).toMatchObject({ exitCode: 3, stdout: '', stderr: '', stdoutBytes: 0 });
      expect(resultOf<Bash>(await call('bash', { command: 'echo after' })).stdout).toBe('after\n');
    }));

  it('bash answers when the command replaced the session state file, and the next command runs', () =>
    withSession(async (call) => {
      // Its own EXIT trap drops the save (documented), so nothing renames a new state over the FIFO.
      const state = path.join(workspace.home, 'bash', 'state.sh');
      const replaced = resultOf<Bash>(await call('bash', { command: `trap - EXIT; rm -f "${state}"; mkfifo "${state}"` }));
      expect(replaced).toMatchObject({ exitCode: 0, cwd: '.' });
      expect(resultOf<Bash>(await call('bash', { command: 'mkdir -p sub && cd sub && echo after' }))).toMatchObject({
        stdout: 'after\n',
        cwd: 'sub',
      });
    }));

  it('bash_output and bash_kill answer when the job files are FIFOs; an output log that is no file is IO_ERROR', () =>
    withSession(async (call) => {
      const { job } = resultOf<{ job: string }>(await call('bash', { command: 'echo out', background: true }));
      const directory = path.join(workspace.home, 'jobs', job);
      for (let attempt = 0; attempt < 100 && !existsSync(path.join(directory, 'exit')); attempt += 1) await sleep(50);
      fifoAt(path.join(directory, 'exit'));
      fifoAt(path.join(directory, 'pid'));
      // No exit record and no pid to be read: the job counts as lost, its output is still read.
      expect(resultOf(await call('bash_output', { job }))).toMatchObject({ status: 'lost', output: 'out\n' });
      expect(resultOf(await call('bash_kill', { job }))).toMatchObject({ job, status: 'lost' });
      fifoAt(path.join(directory, 'output.log'));
      const unreadable = await call('bash_output', { job });
      expect(errorCodeOf(unreadable)).toBe('IO_ERROR');
      expect(unreadable.ok ? '' : unreadable.error.message).toMatch(/no longer a regular file/);
      expect(resultOf<Bash>(await call('bash', { command: 'echo after' })).stdout).toBe('after\n');
    }));

  it('the clean shell stops a job whose killed marker is a FIFO, and answers', () =>
    withSession(async (call) => {
      const { job } = resultOf<{ job: string }>(await call('bash', { command: 'sleep 60', background: true }));
      const directory = path.join(workspace.home, 'jobs', job);
      for (let attempt = 0; attempt < 100 && !existsSync(path.join(directory, 'pid')); attempt += 1) await sleep(50);
      const pid = Number(readFileSync(path.join(directory, 'pid'), 'utf8'));
      fifoAt(path.join(directory, 'killed'));
      expect(resultOf<Bash>(await call('bash', { command: 'echo check' }, true)).stdout).toBe('check\n');
      await sleep(100);
      expect(alive(pid)).toBe(false);
    }));
});
