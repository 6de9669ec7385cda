// Background jobs: `bash` with background: true starts a detached process group that outlives
// the toolbox process, with its state kept in files under <home>/jobs/<id>/ (pid, output.log,
// exit, killed, capped). bash_output and bash_kill read and act on those files, so they work
// from a later `call` process or another serve session. bash_output that finds the log past the
// cap caps the job itself, as the watchdog would (capJob), so no answer depends on its polls.
// Code in the sandbox can replace any of those files (with a FIFO, a symlink, a huge file): they
// are opened without waiting or following and read only as far as needed. A job is its process
// group and whatever writes its log: what the command left running (`server &`) is still the
// job after its shell exited, and so is a process that left the group (`setsid server &`) but
// holds the job's output.log open for writing (file-writers.ts finds it by the open file); both
// are capped by the watchdog and stopped by bash_kill. Once the watchdog wrote `group-ended` the job's pid is free for any new
// process (bash-script.ts says why), so nothing here signals the group after that, nor once
// neither the job's wrapper nor its watchdog is the process recorded at its start
// (job-group-identity.ts): the group may have ended unseen and its id be another's. A writer of
// the log is signalled by its pid right after a scan found it.
import { spawn } from 'node:child_process';
import { access, constants, type FileHandle, mkdir, open, readdir, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { BashJobResult, BashJobStatus, BashKillResult, BashOutputResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { BASH_OUTPUT_MAX_BYTES } from './contract/limits.ts';
import { BASH_JOB_WRAPPER, BASH_PRELUDE } from './bash-script.ts';
import { openToRead, readSmallFile } from './bounded-read.ts';
import { bashStateFile, completeUtf8Length, newLogId } from './bash-session.ts';
import { safeDirectoryEnvironment } from './child-process.ts';
import { releasedEnvironment } from './contract/held-environment.ts';
import { filesOpenForWriting, regularFileAt, sameFile, signalProcesses, type WriterScope, writersOf } from './file-writers.ts';
import { isJobsGroup, observeJobGroup, parseRecordedProcess } from './job-group-identity.ts';
import { groupExists, groupHasLiveProcess, signalGroup } from './process-group.ts';
import { startTicksOf } from './process-table.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

/** A job's pid and exit files hold one number; more than this was not written by the job. */
const JOB_FILE_MAX_BYTES = 64;
/** Written by the watchdog when no live process is left in the job's group (bash-script.ts). */
const GROUP_ENDED = 'group-ended';
/** How long a job stopped by bash_kill gets to exit on SIGTERM, and then on SIGKILL. */
const KILL_GRACE_MS = 1_000;
/** How long stopAllJobs waits for the killed groups to be gone before it marks them ended. */
const STOPPED_GROUPS_WAIT_MS = 1_000;

export async function startBackgroundJob(context: ToolboxContext, shell: string, cwd: string, command: string): Promise<BashJobResult> {
  const job = `job-${newLogId()}`;
  const directory = jobDirectory(context, job);
  await mkdir(directory, { recursive: true });
  const outputLog = path.join(directory, 'output.log');
  await writeFile(outputLog, '');
  const child = spawn(
    shell,
    [
      '-c',
      BASH_JOB_WRAPPER,
      'chamvi-job',
      directory,
      String(context.outputLogMaxBytes),
      BASH_PRELUDE,
      bashStateFile(context),
      context.realRoot,
      cwd,
      'nosave',
      command,
    ],
    {
      cwd: context.realRoot,
      detached: true, // a new session and process group: survives the toolbox, killable as one
      stdio: 'ignore',
      // The run's variables the pod held back from the toolbox are the model's (contract/held-environment.ts).
      env: { ...releasedEnvironment(process.env), ...safeDirectoryEnvironment(context.realRoot), CHAMVI_WORKSPACE: context.realRoot },
    },
  );
  // Read at once, before anything can reap the wrapper: its pid names the job's group only while
  // the process there started then (job-group-identity.ts).
  const leaderStart = child.pid === undefined ? undefined : startTicksOf(child.pid);
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  // Before `pid`: a job with a pid is never read without its start.
  if (leaderStart !== undefined) await writeFile(path.join(directory, 'pid-start'), String(leaderStart));
  await writeFile(path.join(directory, 'pid'), String(child.pid));
  child.unref();
  return { job, status: 'running', outputLog };
}

interface JobState {
  status: BashJobStatus;
  exitCode?: number | null;
  outputCapped: boolean;
}

export async function bashOutput(context: ToolboxContext, input: ToolInput<'bash_output'>): Promise<BashOutputResult> {
  const directory = await existingJob(context, input.job);
  const outputLog = path.join(directory, 'output.log');
  const log = await openOutputLog(outputLog, input.job);
  let size = log?.size ?? 0;
  const passedCap = size > context.outputLogMaxBytes;
  if (passedCap) {
    await capJob(directory);
    // Whatever got past the cap before the kill is cut off. Not while a process of the job may
    // still write (one stuck in the kernel): it would go on at its own offset past the cut.
    if (!(await jobMayWrite(directory))) await truncate(outputLog, context.outputLogMaxBytes).catch(() => undefined);
    size = context.outputLogMaxBytes;
  }
  // Read after the cap, which stops a running job.
  const state = await jobState(directory);
  const offset = Math.min(input.offset ?? 0, size);
  const length = Math.min(BASH_OUTPUT_MAX_BYTES, size - offset);
  const buffer = Buffer.alloc(length);
  let bytesRead = 0;
  try {
    if (log && length > 0) bytesRead = (await log.handle.read(buffer, 0, length, offset)).bytesRead;
  } finally {
    await log?.handle.close();
  }
  // End on a whole character so the next read at nextOffset does not start mid-sequence.
  const usable = offset + bytesRead < size ? completeUtf8Length(buffer.subarray(0, bytesRead)) : bytesRead;
  const nextOffset = offset + usable;
  const result: BashOutputResult = {
    job: input.job,
    status: state.status,
    output: buffer.subarray(0, usable).toString('utf8'),
    offset,
    nextOffset,
    size,
    truncated: nextOffset < size,
    outputCapped: state.outputCapped || passedCap,
  };
  if (state.exitCode !== undefined) result.exitCode = state.exitCode;
  return result;
}

export async function bashKill(context: ToolboxContext, input: ToolInput<'bash_kill'>): Promise<BashKillResult> {
  const directory = await existingJob(context, input.job);
  const before = await jobState(directory);
  // What an exited job left running is killed too, and the job stays `exited` with the exit
  // code of its command: that is how the command ended. One scan for the writers of the log here;
  // stopJob scans again only if this one found some.
  const signalled = before.status === 'running' || (await jobGroupMayBeSignalled(directory));
  const writers = await jobLogWriters(directory);
  if (signalled || writers.length > 0) {
    if (before.status === 'running') await markJob(directory, 'killed');
    await stopJob(directory, writers);
  }
  const after = await jobState(directory);
  const result: BashKillResult = { job: input.job, status: after.status };
  if (after.exitCode !== undefined) result.exitCode = after.exitCode;
  return result;
}

/**
 * What the watchdog does at the cap, done by bash_output when it finds the log past it first: the
 * watchdog polls, so a call can come between the log passing the cap and its next look, and code
 * in the sandbox can stop or kill it. The `capped` marker is written first, whatever the job's
 * state, so this call and every later one read the same: a running job as killed by the cap, one
 * whose command exited as exited with its code (jobState), and outputCapped on every call, also
 * once the log was cut back to the cap and no longer shows it. Then SIGKILL, no grace, to the
 * group and every writer of the log, as the watchdog sends and as the foreground cap kills a
 * holder of a log past it (output-holders.ts), and a bounded wait for them to be gone.
 */
async function capJob(directory: string): Promise<void> {
  await markJob(directory, 'capped');
  if (await jobGroupMayBeSignalled(directory)) signalGroup(await jobPid(directory), 'SIGKILL');
  const writers = await jobLogWriters(directory);
  signalProcesses(writers, 'SIGKILL');
  await waitUntilJobStops(directory, writers, KILL_GRACE_MS, 10);
}

/**
 * SIGTERM to the job's group and the writers of its log, a moment to exit cleanly, then SIGKILL
 * to whatever may be left. The escalation does not trust a /proc scan to say the job ended: a
 * relay (each process forks its successor and exits) that ignores SIGTERM can hide from every
 * scan, so the group gets SIGKILL whenever a process still has its id (kill -0, zombies included:
 * they ignore it). The group is asked again each time: once no process has its id, it may be
 * someone else's. A scan of every process's descriptors costs a lot on a busy sandbox, so the log
 * is scanned for again (before the SIGKILL) only when the first scan found writers outside what
 * the group kill reaches; the waits ask only the writers found whether they still hold the log.
 */
async function stopJob(directory: string, writers: readonly number[]): Promise<void> {
  const pid = await jobPid(directory);
  if (await jobGroupMayBeSignalled(directory)) signalGroup(pid, 'SIGTERM');
  signalProcesses(writers, 'SIGTERM');
  await waitUntilJobStops(directory, writers, KILL_GRACE_MS, 25);
  if (await jobGroupMayBeSignalled(directory)) signalGroup(pid, 'SIGKILL');
  const left = writers.length > 0 ? await jobLogWriters(directory) : [];
  signalProcesses(left, 'SIGKILL');
  // Bounded: a process stuck in the kernel (state D) dies only when its call returns.
  await waitUntilJobStops(directory, left, KILL_GRACE_MS, 10);
}

async function waitUntilJobStops(directory: string, writers: readonly number[], timeoutMs: number, pollMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && (await jobMayWrite(directory, { among: writers }))) await delay(pollMs);
}

/**
 * Stops every background job the bash tool started (the operator's verification does this
 * first, so a job the model left looping cannot rewrite files while the check runs), the
 * writers of its log included. A job whose process group is gone and whose log nothing writes
 * is left as it is. Each group found gone afterwards is marked ended, as its watchdog would (the
 * sweep after this kills the watchdogs in the sandbox, and then the job's pid may be reused).
 */
export async function stopAllJobs(context: ToolboxContext): Promise<number> {
  const jobs = await readdir(path.join(context.home, 'jobs')).catch(() => [] as string[]);
  const directories = jobs.map((job) => jobDirectory(context, job));
  // One scan of /proc for the writers of every job's log.
  const logs = directories.map((directory) => regularFileAt(path.join(directory, 'output.log')));
  const known = logs.filter((log) => log !== undefined);
  const opened = known.length === 0 ? [] : ((await filesOpenForWriting((file) => known.some((log) => sameFile(log, file)))) ?? []);
  let stopped = 0;
  for (const [index, directory] of directories.entries()) {
    const log = logs[index];
    const writers = log ? opened.filter((file) => sameFile(file, log)).map((file) => file.pid) : [];
    const signalled = await jobGroupMayBeSignalled(directory);
    if (!signalled && writers.length === 0) continue;
    if ((await jobState(directory)).status === 'running') await markJob(directory, 'killed');
    if (signalled) signalGroup(await jobPid(directory), 'SIGKILL');
    signalProcesses(writers, 'SIGKILL');
    stopped += 1;
  }
  const deadline = Date.now() + STOPPED_GROUPS_WAIT_MS;
  for (const directory of directories) {
    if (await groupMarkedEnded(directory)) continue;
    if ((await jobPid(directory)) === undefined) continue;
    // Killed processes stay zombies, and keep the id, until they are reaped (tini reaps at once).
    // A group that may no longer be the job's is marked too: nothing signals it either way.
    while ((await jobGroupMayBeSignalled(directory)) && Date.now() < deadline) await delay(20);
    if (!(await jobGroupMayBeSignalled(directory))) await markJob(directory, GROUP_ENDED);
  }
  return stopped;
}

function jobDirectory(context: ToolboxContext, job: string): string {
  return path.join(context.home, 'jobs', job);
}

async function existingJob(context: ToolboxContext, job: string): Promise<string> {
  const directory = jobDirectory(context, job);
  try {
    await access(path.join(directory, 'output.log'));
  } catch {
    throw new ToolboxError('JOB_NOT_FOUND', `There is no background job ${job}; start one with bash and background: true`);
  }
  return directory;
}

/**
 * The job's output log opened to read with its size, undefined when it is gone. Opened the
 * way read_file opens (no FIFO waited on, no symlink followed); anything but a regular file
 * there was put by code in the sandbox and is refused rather than read.
 */
async function openOutputLog(outputLog: string, job: string): Promise<{ handle: FileHandle; size: number } | undefined> {
  const notALog = () =>
    new ToolboxError(
      'IO_ERROR',
      `The output log of ${job} is no longer a regular file (something in the sandbox replaced it), so its output cannot be read; bash_kill still stops the job`,
    );
  let handle: FileHandle;
  try {
    handle = await openToRead(outputLog);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    // ELOOP: a symlink (O_NOFOLLOW); ENXIO: a socket.
    if (code === 'ELOOP' || code === 'ENXIO') throw notALog();
    throw error;
  }
  const stats = await handle.stat().catch(() => undefined);
  if (stats?.isFile()) return { handle, size: stats.size };
  await handle.close();
  throw notALog();
}

/**
 * Creates a marker file. Not waiting: a FIFO planted under the name would hold the open (and
 * one of libuv's threads) until a reader came. Anything already standing there counts as the
 * marker (jobState only asks whether the name exists), so a failure to create it is ignored.
 */
async function markJob(directory: string, name: string): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOFOLLOW;
  const handle = await open(path.join(directory, name), flags).catch(() => undefined);
  await handle?.close();
}

async function jobState(directory: string): Promise<JobState> {
  const marker = (name: string) =>
    access(path.join(directory, name)).then(
      () => true,
      () => false,
    );
  const [exitText, killed, capped, groupEnded] = await Promise.all([
    readSmallFile(path.join(directory, 'exit'), JOB_FILE_MAX_BYTES),
    marker('killed'),
    marker('capped'),
    marker(GROUP_ENDED),
  ]);
  // The markers are written just before the group is sent SIGKILL, which cannot be ignored. The
  // wrapper that writes `exit` is in the group, so an exit record means the command's shell ended
  // on its own before any kill: a cap reached later (by what it left running) caps the output but
  // does not change how the command ended.
  if (killed) return { status: 'killed', exitCode: null, outputCapped: capped };
  if (exitText !== undefined) return { status: 'exited', exitCode: Number(exitText.toString('utf8').trim()), outputCapped: capped };
  if (capped) return { status: 'killed', exitCode: null, outputCapped: true };
  if (!groupEnded && (await jobGroupMayBeSignalled(directory))) return { status: 'running', outputCapped: false };
  // No exit record and no process: the sandbox restarted, or the wrapper was killed from outside.
  return { status: 'lost', outputCapped: false };
}

/**
 * Whether the job's group may still have a process to signal: any process, a zombie included,
 * has its id (kill -0). Not asked of /proc: a scan can miss a job that forks its successor and
 * exits (a relay). Never after the watchdog saw the group end, nor when the group may have ended
 * unseen (jobOwnsGroup): a process of someone else may have the job's pid as its group id by now.
 */
async function jobGroupMayBeSignalled(directory: string): Promise<boolean> {
  const pid = await jobPid(directory);
  return !(await groupMarkedEnded(directory)) && groupExists(pid) && (await jobOwnsGroup(directory, pid));
}

/** Whether the job's pid still names its group: its wrapper or its watchdog is still the process recorded (job-group-identity.ts). */
async function jobOwnsGroup(directory: string, pid: number | undefined): Promise<boolean> {
  if (pid === undefined) return false;
  const [leaderStart, watchdog] = await Promise.all([
    readSmallFile(path.join(directory, 'pid-start'), JOB_FILE_MAX_BYTES),
    readSmallFile(path.join(directory, 'watchdog'), JOB_FILE_MAX_BYTES),
  ]);
  const leaderStartTicks = Number(leaderStart?.toString('utf8').trim() || Number.NaN);
  return isJobsGroup(
    observeJobGroup(
      pid,
      Number.isSafeInteger(leaderStartTicks) ? leaderStartTicks : undefined,
      parseRecordedProcess(watchdog?.toString('utf8')),
    ),
  );
}

/**
 * Whether a process of the job may still write its log: a live process of its group (a zombie
 * cannot write), or any process that holds the log open for writing.
 */
async function jobMayWrite(directory: string, scope: WriterScope = {}): Promise<boolean> {
  if ((await jobGroupMayBeSignalled(directory)) && (await groupHasLiveProcess(await jobPid(directory)))) return true;
  return (await jobLogWriters(directory, scope)).length > 0;
}

/** The processes, in the job's group or not, that hold its output log open for writing (every process's descriptors read, unless scoped). */
async function jobLogWriters(directory: string, scope: WriterScope = {}): Promise<number[]> {
  const log = regularFileAt(path.join(directory, 'output.log'));
  return log ? writersOf([log], scope) : [];
}

function groupMarkedEnded(directory: string): Promise<boolean> {
  return access(path.join(directory, GROUP_ENDED)).then(
    () => true,
    () => false,
  );
}

async function jobPid(directory: string): Promise<number | undefined> {
  const text = await readSmallFile(path.join(directory, 'pid'), JOB_FILE_MAX_BYTES);
  const pid = Number(text?.toString('utf8').trim() ?? '');
  return Number.isSafeInteger(pid) && pid > 1 ? pid : undefined;
}
