// Before the operator's check (spec.verify: the restore of the protected paths and the clean
// bash), nothing the model started may still run: a loop that writes over a restored test, or
// that answers for the check. Background jobs the toolbox started are stopped by their files
// (bash-jobs.ts), but a plain `nohup loop &` or a `setsid` daemon is in no job. In the
// sandbox container every process is the run's but three kinds, so there the toolbox stops
// all the others:
// - PID 1 (tini, or node idling on IDLE_SCRIPT in a custom image) and, under tini, its first
//   child: the idle node, started before any exec could be;
// - each exec session's first process, whose parent is outside the container (ppid 0: the
//   model cannot start one), and this process's own ancestors;
// - zombies, which are only waiting to be reaped (not a process whose main thread alone exited:
//   /proc shows it as Z too, but its other threads run; process-table.ts tells them apart).
// The container is known by PID 1 running IDLE_SCRIPT. Anywhere else (a local sandbox, kwok,
// where the toolbox is a process of the host) only the jobs are stopped.
import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { IDLE_SCRIPT } from './contract/sandbox-init.ts';
import { stopAllJobs } from './bash-jobs.ts';
import { isLive, processTable, type ProcessEntry } from './process-table.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

/** How PID 1 idles: under tini (the default image), or node itself (a custom image). */
export type SandboxInit = 'tini' | 'node';

/** How many sweeps a process that keeps forking gets before the toolbox gives up. */
const MAX_SWEEPS = 50;
const SWEEP_PAUSE_MS = 20;

/** PID 1's argv says whether this is a sandbox container; undefined anywhere else. */
export function sandboxInit(argv: readonly string[]): SandboxInit | undefined {
  const idle = argv.length >= 3 && argv.at(-2) === '-e' && argv.at(-1) === IDLE_SCRIPT;
  if (!idle) return undefined;
  if (argv.length === 3) return 'node';
  return argv.length === 5 && /(^|\/)tini$/.test(argv[0]!) && argv[1] === '--' ? 'tini' : undefined;
}

/** The processes a sweep stops: every one in the container but those the header names. Pure. */
export function leftoverPids(processes: readonly ProcessEntry[], self: number, init: SandboxInit): number[] {
  const byPid = new Map(processes.map((entry) => [entry.pid, entry]));
  const kept = new Set<number>([1]);
  for (let pid: number | undefined = self; pid !== undefined && pid > 0 && !kept.has(pid); pid = byPid.get(pid)?.ppid) kept.add(pid);
  if (init === 'tini') {
    const idle = processes.filter((entry) => entry.ppid === 1).sort((a, b) => a.startTicks - b.startTicks || a.pid - b.pid)[0];
    if (idle) kept.add(idle.pid);
  }
  return processes.filter((entry) => !kept.has(entry.pid) && entry.ppid !== 0 && isLive(entry)).map((entry) => entry.pid);
}

async function initOfThisContainer(): Promise<SandboxInit | undefined> {
  const cmdline = await readFile('/proc/1/cmdline', 'utf8').catch(() => '');
  return sandboxInit(cmdline.replace(/\0$/, '').split('\0'));
}

/**
 * Stops the model's background jobs and, in the sandbox container, every other process the run
 * started; throws when some still run after every sweep (the check then does not run, so
 * nothing is graded).
 */
export async function stopLeftoverProcesses(context: ToolboxContext): Promise<void> {
  await stopAllJobs(context);
  const init = await initOfThisContainer();
  if (!init) return;
  for (let sweep = 0; sweep < MAX_SWEEPS; sweep++) {
    const leftover = leftoverPids(await processTable(), process.pid, init);
    if (leftover.length === 0) return;
    for (const pid of leftover) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already, or not ours to signal (then the next sweep finds it again).
      }
    }
    await delay(SWEEP_PAUSE_MS);
  }
  throw new ToolboxError('IO_ERROR', 'processes left running in the sandbox could not be stopped before the check');
}
