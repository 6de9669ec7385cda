// Starts one control-plane program as its own process group, with output in a log file
// and its pid in a pid file, and stops it again. Pid files let `cli.ts down` stop a
// control plane started by an earlier, already exited `cli.ts up`.
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ManagedProcessOptions {
  /** Short name; the log is `<stateDir>/logs/<name>.log`, the pid `<stateDir>/pids/<name>.pid`. */
  name: string;
  stateDir: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export interface ManagedProcess {
  name: string;
  pid: number;
  logPath: string;
  /** Set once the process has exited (while this Node process is watching it). */
  exited: () => { code: number | null; signal: NodeJS.Signals | null } | undefined;
}

export function logPathOf(stateDir: string, name: string): string {
  return join(stateDir, 'logs', `${name}.log`);
}

function pidPathOf(stateDir: string, name: string): string {
  return join(stateDir, 'pids', `${name}.pid`);
}

export function startManagedProcess(options: ManagedProcessOptions): ManagedProcess {
  const logPath = logPathOf(options.stateDir, options.name);
  const logFd = openSync(logPath, 'a');
  // detached: a new session and process group, so the program survives the CLI that
  // started it and can be stopped with everything it forks by signalling the group.
  const child = spawn(options.command, options.args, {
    cwd: options.cwd ?? options.stateDir,
    env: options.env ?? process.env,
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  if (child.pid === undefined) {
    throw new Error(`could not start ${options.name} (${options.command}); see ${logPath}`);
  }
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  child.on('exit', (code, signal) => {
    exit = { code, signal };
  });
  child.on('error', () => {
    exit ??= { code: null, signal: null };
  });
  child.unref();
  writeFileSync(pidPathOf(options.stateDir, options.name), `${child.pid}\n${options.command}\n`);
  return { name: options.name, pid: child.pid, logPath, exited: () => exit };
}

/** True when the pid is a live (not zombie) process still running `command`. */
function isOurs(pid: number, command: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3 is the state; a zombie has already exited and only waits to be reaped.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z') return false;
    const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
    // The pid may have been reused by an unrelated program since we wrote the pid file.
    // redis-server rewrites its argv into "<path> <host>:<port>", hence the prefix match.
    return argv0 === command || argv0.startsWith(`${command} `);
  } catch {
    return false;
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** Stops one process group: SIGTERM, then SIGKILL after `graceMs`. */
export async function stopProcessGroup(pid: number, command: string, graceMs = 10_000): Promise<void> {
  if (!isOurs(pid, command)) return;
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isOurs(pid, command)) break;
    await sleep(50);
  }
  // Also kill anything left in the group (a kwok exec'd command, for instance).
  signalGroup(pid, 'SIGKILL');
  while (isOurs(pid, command)) await sleep(50);
}

export interface RecordedProcess {
  name: string;
  pid: number;
  command: string;
}

/** The processes recorded in `<stateDir>/pids/`, whether or not they still run. */
export function recordedProcesses(stateDir: string): RecordedProcess[] {
  let files: string[];
  try {
    files = readdirSync(join(stateDir, 'pids'));
  } catch {
    return [];
  }
  return files
    .filter((file) => file.endsWith('.pid'))
    .map((file) => {
      const [pid = '', command = ''] = readFileSync(join(stateDir, 'pids', file), 'utf8').split('\n');
      return { name: file.slice(0, -'.pid'.length), pid: Number(pid), command };
    })
    .filter((entry) => Number.isInteger(entry.pid) && entry.pid > 0);
}

export function isRecordedProcessRunning(entry: RecordedProcess): boolean {
  return isOurs(entry.pid, entry.command);
}

/** Stops every recorded process, in the reverse of `order` (unknown names first). */
export async function stopRecordedProcesses(stateDir: string, order: readonly string[]): Promise<void> {
  const rank = (name: string) => order.indexOf(name);
  const entries = recordedProcesses(stateDir).sort((a, b) => rank(b.name) - rank(a.name));
  for (const entry of entries) {
    await stopProcessGroup(entry.pid, entry.command);
    rmSync(pidPathOf(stateDir, entry.name), { force: true });
  }
}

/** The last lines of a log, for error messages. */
export function logTail(logPath: string, lines = 25): string {
  try {
    return readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
