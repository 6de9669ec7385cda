// bash: runs one command in its own process group with the session's persisted working
// directory and exports, output straight into log files (the toolbox never buffers a
// stream), a cap that kills the command when a log passes it, a timeout that kills the whole
// tree, and a result showing the head and tail of each stream. What the command leaves running
// with its logs still open (in its process group or not) is left running, and the result says so,
// unless its output passes the cap while the call waits for it or when a later command runs
// (output-holders.ts). The
// command can reach the logs and the state file under the home: the toolbox reads them back
// without waiting on a FIFO or following a symlink put in their place, and only as far as it needs.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { type FileHandle, lstat, mkdir, open, readdir, realpath, rename, stat, truncate, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { BashJobResult, BashResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { BASH_DEFAULT_TIMEOUT_MS, BASH_HEAD_BYTES, BASH_MAX_TIMEOUT_MS, BASH_TAIL_BYTES } from './contract/limits.ts';
import { BASH_PRELUDE } from './bash-script.ts';
import { openToRead, readSmallFile } from './bounded-read.ts';
import { startBackgroundJob } from './bash-jobs.ts';
import { stopLeftoverProcesses } from './leftover-processes.ts';
import { safeDirectoryEnvironment } from './child-process.ts';
import { releasedEnvironment } from './contract/held-environment.ts';
import { findHelper } from './helper-programs.ts';
import { operatorShellEnvironment } from './operator-shell-environment.ts';
import { trackForegroundGroup } from './foreground-groups.ts';
import { type CommandLog, outputHoldersAfter } from './output-holders.ts';
import { guardWorkspacePath, isInside, toPosix } from './path-guard.ts';
import { startTicksOf } from './process-table.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

/** Keep the logs of this many recent commands; older ones are deleted. */
const KEEP_COMMAND_LOGS = 200;
/** And at most this much log in all (each stream alone may reach the 64 MiB cap). */
const KEEP_LOG_BYTES = 512 * 1_048_576;
/** How often the log sizes are checked against the cap. */
const CAP_POLL_MS = 20;
/** Commands are passed as one argv string, which Linux limits to 128 KiB. */
const COMMAND_MAX_CHARS = 100_000;
/**
 * How long what the command left with its logs open gets to finish before the result is read:
 * while it keeps writing (a process substitution's reader), up to a limit.
 */
const OUTPUT_HOLDERS_WAIT = { quietMs: 100, maxMs: 2_000 };

const BACKGROUND_ADVICE =
  'For a server or a watcher use background: true (bash_output reads it, bash_kill stops it), ' +
  'or send both stdout and stderr elsewhere (> file 2>&1).';

/** Told to the model when processes the command left running still have its output open (output-holders.ts). */
function outputHoldersNote(count: number): string {
  const [processes, are, they, write] = count === 1 ? ['process', 'is', 'it', 'writes'] : ['processes', 'are', 'they', 'write'];
  return (
    `\n[chamvi: ${count} ${processes} this command started ${are} still running with its output open: ` +
    `what ${they} ${write} goes to the command's log, which is no longer shown, and ${they} ${are} stopped at a later ` +
    `bash command once the log has passed the cap. ${BACKGROUND_ADVICE}]\n`
  );
}

/** Told to the model when processes the command left running were killed for passing the cap (output-holders.ts). */
function stoppedHoldersNote(count: number, capBytes: number): string {
  const [processes, were, their] = count === 1 ? ['process', 'was', 'its'] : ['processes', 'were', 'their'];
  return (
    `\n[chamvi: ${count} ${processes} this command left running ${were} stopped because ${their} output passed ` +
    `the cap of ${capBytes} bytes. ${BACKGROUND_ADVICE}]\n`
  );
}
/** Told to the model when what an earlier command left running was killed for passing the cap (output-holders.ts). */
function earlierStoppedNote(count: number, capBytes: number): string {
  const [processes, were] = count === 1 ? ['process', 'was'] : ['processes', 'were'];
  return (
    `\n[chamvi: ${count} ${processes} an earlier command left running ${were} stopped: that command's log passed the ` +
    `cap of ${capBytes} bytes, and every process holding it open for writing is stopped. ${BACKGROUND_ADVICE}]\n`
  );
}

/** Enough of the state file for its first line, `# <working directory>` (PATH_MAX is 4 KiB). */
const STATE_FIRST_LINE_MAX_BYTES = 16_384;

export function bashStateFile(context: ToolboxContext): string {
  return path.join(context.home, 'bash', 'state.sh');
}

export async function runBash(context: ToolboxContext, input: ToolInput<'bash'>): Promise<BashResult | BashJobResult> {
  // The shell itself is found outside the workspace (helper-programs.ts); the model's commands
  // in it keep the run's PATH and HOME, the operator's own do not (operator-shell-environment.ts).
  const shell = findHelper(context, 'bash');
  if (!shell) throw new ToolboxError('IO_ERROR', 'bash is not installed in this sandbox');
  if (input.command.length > COMMAND_MAX_CHARS) {
    throw new ToolboxError('INVALID_INPUT', 'The command is too long; write it to a script with write_file and run the script');
  }
  const cwd = input.cwd === undefined ? '' : await guardCwd(context, input.cwd);
  await mkdir(path.join(context.home, 'bash'), { recursive: true });
  if ((context.cleanShell || context.operatorEnvironment) && input.background)
    throw new ToolboxError('INVALID_INPUT', 'A clean shell runs in the foreground only');
  // The operator's check: nothing the model left running may touch the workspace meanwhile.
  // Not the diff snapshot ('keep-jobs'), taken after every step: background jobs outlive steps.
  if (context.cleanShell === true) await stopLeftoverProcesses(context);
  if (input.background) return startBackgroundJob(context, shell, cwd, input.command);
  return runForeground(context, shell, cwd, input.command, Math.min(input.timeoutMs ?? BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS));
}

async function runForeground(context: ToolboxContext, shell: string, cwd: string, command: string, timeoutMs: number): Promise<BashResult> {
  const outDirectory = path.join(context.home, 'out');
  await mkdir(outDirectory, { recursive: true });
  const id = newLogId();
  const stdoutLog = path.join(outDirectory, `${id}.stdout.log`);
  const stderrLog = path.join(outDirectory, `${id}.stderr.log`);
  const [stdoutHandle, stderrHandle] = await Promise.all([open(stdoutLog, 'w'), open(stderrLog, 'w')]);
  // The files themselves, not their names: the command may delete or replace the names.
  const logFile = async (handle: FileHandle, logPath: string): Promise<CommandLog> => {
    const { dev, ino } = await handle.stat({ bigint: true });
    return { path: logPath, dev, ino };
  };
  const logFiles = await Promise.all([logFile(stdoutHandle, stdoutLog), logFile(stderrHandle, stderrLog)]);
  const started = performance.now();
  // A clean shell (the operator's verification) neither reads nor writes the session's state:
  // the model writes that file (it is sourced shell), so a check run after it must not. Nor does
  // an operator's own command: the state's exports (PATH, HOME) would undo its environment.
  const fresh = Boolean(context.cleanShell || context.operatorEnvironment);
  const stateFile = fresh ? '' : bashStateFile(context);

  const child = spawn(shell, ['-c', BASH_PRELUDE, 'chamvi', stateFile, context.realRoot, cwd, fresh ? '' : 'save', command], {
    cwd: context.realRoot,
    detached: true, // its own process group, so a kill reaches everything it started
    stdio: ['ignore', stdoutHandle.fd, stderrHandle.fd],
    // The run's variables the pod held back from the toolbox are the model's (contract/held-environment.ts).
    env: context.operatorEnvironment
      ? operatorShellEnvironment(context)
      : { ...releasedEnvironment(process.env), ...safeDirectoryEnvironment(context.realRoot), CHAMVI_WORKSPACE: context.realRoot },
  });
  // Read before anything yields to the event loop, which would reap a command that already exited.
  const commandStartTicks = child.pid === undefined ? undefined : startTicksOf(child.pid);
  // Listen before the first await: a fast command can exit while the handles are closing.
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
  await Promise.all([stdoutHandle.close(), stderrHandle.close()]);
  const untrack = child.pid === undefined ? () => undefined : trackForegroundGroup(child.pid);

  let timedOut = false;
  let outputCapped = false;
  const killGroup = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup();
  }, timeoutMs);
  let polling = false;
  const capWatch = setInterval(() => {
    if (polling) return;
    polling = true;
    Promise.all([stat(stdoutLog), stat(stderrLog)])
      .then(([out, err]) => {
        if (!outputCapped && Math.max(out.size, err.size) > context.outputLogMaxBytes) {
          outputCapped = true;
          killGroup();
        }
      })
      .catch(() => undefined)
      .finally(() => {
        polling = false;
      });
  }, CAP_POLL_MS);

  const exitCode = await exited.finally(() => {
    clearTimeout(timer);
    clearInterval(capWatch);
  });
  // Still tracked meanwhile: a toolbox told to stop while it waits kills the group. The cap
  // still holds while it waits: a leftover whose output passes it is killed, whatever its group
  // (the group kill above does not reach one that left it).
  const logDirectory = await realpath(outDirectory).catch(() => outDirectory);
  const holders = await outputHoldersAfter(logFiles, {
    ...OUTPUT_HOLDERS_WAIT,
    capBytes: context.outputLogMaxBytes,
    logDirectory,
    commandStartTicks,
  }).finally(untrack);

  // The shell wrote its state beside the current one; replacing it by rename keeps it atomic
  // for a concurrent command that is reading it.
  if (child.pid !== undefined && stateFile !== '') await rename(`${stateFile}.next.${child.pid}`, stateFile).catch(() => undefined);

  // Output written between two polls may have gone past the cap: the log keeps at most the cap.
  const [stdoutCap, stderrCap] = await Promise.all([
    capLog(stdoutLog, context.outputLogMaxBytes),
    capLog(stderrLog, context.outputLogMaxBytes),
  ]);
  // The command itself was killed; leftovers stopped for the cap do not change how its shell ended.
  const killedByUs = timedOut || outputCapped;
  outputCapped ||= holders.stoppedOverCap > 0 || stdoutCap.wasOver || stderrCap.wasOver;
  const stdoutSize = stdoutCap.size;
  const stderrSize = stderrCap.size;
  const [stdout, stderr] = await Promise.all([headAndTail(stdoutLog, stdoutSize), headAndTail(stderrLog, stderrSize)]);
  // The notes are the toolbox's, like the omitted-bytes line: the log keeps only the command's
  // output. After a kill of the group, what still holds a log is what left the group (`setsid`).
  const notes =
    (holders.stoppedOverCap > 0 ? stoppedHoldersNote(holders.stoppedOverCap, context.outputLogMaxBytes) : '') +
    (holders.running > 0 ? outputHoldersNote(holders.running) : '') +
    (holders.earlierStoppedOverCap > 0 ? earlierStoppedNote(holders.earlierStoppedOverCap, context.outputLogMaxBytes) : '');
  const result: BashResult = {
    exitCode: killedByUs ? null : exitCode,
    stdout: stdout.text,
    stderr: `${stderr.text}${notes}`,
    stdoutTruncated: stdout.truncated,
    stderrTruncated: stderr.truncated,
    stdoutBytes: stdoutSize,
    stderrBytes: stderrSize,
    stdoutLog,
    stderrLog,
    cwd: await currentDirectory(context),
    outputCapped,
    timedOut,
    durationMs: Math.round(performance.now() - started),
  };
  await pruneLogs(outDirectory, stdoutSize + stderrSize > 1_048_576).catch(() => undefined);
  return result;
}

async function guardCwd(context: ToolboxContext, cwd: string): Promise<string> {
  const target = await guardWorkspacePath(context, cwd, { allowDenied: true });
  const stats = await stat(target.real).catch(() => undefined);
  if (!stats?.isDirectory()) throw new ToolboxError('NOT_FOUND', `cwd ${cwd} is not an existing directory`);
  return target.real;
}

/** The directory the last command ended in, root-relative when inside the workspace. */
async function currentDirectory(context: ToolboxContext): Promise<string> {
  const head = await readSmallFile(bashStateFile(context), STATE_FIRST_LINE_MAX_BYTES);
  const state = head?.toString('utf8') ?? '';
  const newline = state.indexOf('\n');
  const first = state.startsWith('# ') && newline > 2 ? state.slice(2, newline) : context.realRoot;
  if (!isInside(context.realRoot, first)) return first;
  return toPosix(path.relative(context.realRoot, first)) || '.';
}

/** A log the command replaced by anything but a regular file counts as empty (headAndTail does not read it). */
async function capLog(log: string, cap: number): Promise<{ size: number; wasOver: boolean }> {
  const stats = await lstat(log).catch(() => undefined);
  const size = stats?.isFile() ? stats.size : 0;
  if (size <= cap) return { size, wasOver: false };
  await truncate(log, cap).catch(() => undefined);
  return { size: cap, wasOver: true };
}

/**
 * The first 8 KiB and the last 24 KiB of a log, cut on UTF-8 character boundaries. A log that
 * is gone, or is no longer a regular file (the command replaced it by a FIFO, a symlink),
 * shows as empty, like a deleted one: it is never waited on or followed.
 */
export async function headAndTail(log: string, size: number): Promise<{ text: string; truncated: boolean }> {
  const handle = await openToRead(log).catch(() => undefined);
  if (!handle) return { text: '', truncated: false };
  try {
    if (!(await handle.stat()).isFile()) return { text: '', truncated: false };
    if (size <= BASH_HEAD_BYTES + BASH_TAIL_BYTES) {
      const buffer = Buffer.alloc(size);
      const { bytesRead } = await handle.read(buffer, 0, size, 0);
      return { text: buffer.subarray(0, bytesRead).toString('utf8'), truncated: false };
    }
    const head = Buffer.alloc(BASH_HEAD_BYTES);
    const tail = Buffer.alloc(BASH_TAIL_BYTES);
    await handle.read(head, 0, BASH_HEAD_BYTES, 0);
    await handle.read(tail, 0, BASH_TAIL_BYTES, size - BASH_TAIL_BYTES);
    const headText = head.subarray(0, completeUtf8Length(head)).toString('utf8');
    const tailText = tail.subarray(leadingContinuationBytes(tail)).toString('utf8');
    const omitted = size - BASH_HEAD_BYTES - BASH_TAIL_BYTES;
    return {
      text: `${headText}\n[... ${omitted} bytes omitted; read the full output from the log with read_file ...]\n${tailText}`,
      truncated: true,
    };
  } finally {
    await handle.close();
  }
}

/** Length of the buffer without a trailing incomplete UTF-8 sequence. */
export function completeUtf8Length(buffer: Uint8Array): number {
  let index = buffer.length - 1;
  let continuation = 0;
  while (index >= 0 && continuation < 3 && ((buffer[index] as number) & 0xc0) === 0x80) {
    index -= 1;
    continuation += 1;
  }
  if (index < 0) return buffer.length;
  const lead = buffer[index] as number;
  const needed = lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : lead >= 0xc0 ? 1 : 0;
  return needed > continuation ? index : buffer.length;
}

function leadingContinuationBytes(buffer: Uint8Array): number {
  let index = 0;
  while (index < 3 && index < buffer.length && ((buffer[index] as number) & 0xc0) === 0x80) index += 1;
  return index;
}

export function newLogId(): string {
  // Time first, so names sort by age for pruning.
  return `${Date.now().toString(36).padStart(9, '0')}-${randomBytes(4).toString('hex')}`;
}

/** Deletes the oldest logs past the count, and (after a large command) past the byte budget. */
async function pruneLogs(directory: string, checkSize: boolean): Promise<void> {
  let names = (await readdir(directory)).sort();
  const excess = names.length - KEEP_COMMAND_LOGS * 2;
  if (excess > 0) {
    await Promise.all(names.slice(0, excess).map((name) => unlink(path.join(directory, name)).catch(() => undefined)));
    names = names.slice(excess);
  }
  if (!checkSize) return;
  const sizes = await Promise.all(
    names.map((name) =>
      stat(path.join(directory, name)).then(
        (stats) => stats.size,
        () => 0,
      ),
    ),
  );
  let total = sizes.reduce((sum, size) => sum + size, 0);
  // Oldest first; the newest pair (this command's logs) is always kept.
  for (let index = 0; index < names.length - 2 && total > KEEP_LOG_BYTES; index += 1) {
    await unlink(path.join(directory, names[index] as string)).catch(() => undefined);
    total -= sizes[index] ?? 0;
  }
}
