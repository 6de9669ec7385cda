// A toolbox stopped from inside (`kill -STOP $PPID` in a bash it ran) never answers again, so
// the operator drops its session; over pods/exec that only closes the websocket, and the stopped
// process stays in the container for the pod's lifetime. Its locks stay with it: file-locks.ts
// waits for a live owner, and a stopped one counts as live, so the redo of its call (same call
// id, same journal lock) waited out REPEAT_WAIT and every later edit of a file it was editing
// timed out. A new `serve` session therefore first kills every stopped toolbox of an earlier
// exec session in the container; their locks then have dead owners and are taken over.
//
// Which processes: only in the sandbox container (PID 1 idling on IDLE_SCRIPT, as for the
// leftover sweep), and only an exec session's first process (ppid 0: nothing started inside
// the container has one, so the model cannot make a process look like one) that runs the
// toolbox exactly as this session does (the operator's toolboxCommand, then a toolbox command)
// and is stopped (T, or t under a tracer). Never PID 1, this process or its ancestors; never
// a running session.
import { readFileSync } from 'node:fs';
import { TOOLBOX_COMMANDS } from './contract/protocol.ts';
import { sandboxInit } from './leftover-processes.ts';
import { type ProcessEntry, processTableNow } from './process-table.ts';

export interface ProcessWithCommand extends ProcessEntry {
  /** Its argv (/proc/PID/cmdline split at NUL); undefined when unreadable. */
  argv: readonly string[] | undefined;
}

/** How this process was started, e.g. ['/opt/chamvi/node', '/opt/chamvi/toolbox.mjs', 'serve']. */
export function toolboxPrefix(ownArgv: readonly string[]): readonly string[] | undefined {
  // The operator runs `[...toolboxCommand, 'serve']`: what comes before `serve` starts every toolbox it execs.
  return ownArgv.length >= 2 && ownArgv.at(-1) === 'serve' ? ownArgv.slice(0, -1) : undefined;
}

/** The stopped toolbox sessions to kill: see the header. Pure. */
export function stoppedToolboxPids(processes: readonly ProcessWithCommand[], self: number, prefix: readonly string[]): number[] {
  const byPid = new Map(processes.map((entry) => [entry.pid, entry]));
  const kept = new Set<number>([1]);
  for (let pid: number | undefined = self; pid !== undefined && pid > 0 && !kept.has(pid); pid = byPid.get(pid)?.ppid) kept.add(pid);
  const runsToolbox = (argv: readonly string[] | undefined) =>
    argv !== undefined &&
    argv.length > prefix.length &&
    prefix.every((part, index) => argv[index] === part) &&
    (TOOLBOX_COMMANDS as readonly string[]).includes(argv[prefix.length]!);
  return processes
    .filter((entry) => !kept.has(entry.pid) && entry.ppid === 0 && (entry.state === 'T' || entry.state === 't') && runsToolbox(entry.argv))
    .map((entry) => entry.pid);
}

const argvOf = (pid: number | string): string[] | undefined => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0$/, '').split('\0');
  } catch {
    return undefined;
  }
};

/**
 * Kills the stopped toolboxes of earlier exec sessions (see the header); does nothing outside
 * the sandbox container or without /proc. Synchronous, so it is done before the first request
 * is read; SIGKILL ends a stopped process at once.
 */
export function killStoppedToolboxes(): number[] {
  try {
    if (!sandboxInit(argvOf(1) ?? [])) return [];
    const prefix = toolboxPrefix(argvOf('self') ?? []);
    if (!prefix) return [];
    const processes = processTableNow().map((entry) => ({ ...entry, argv: entry.ppid === 0 ? argvOf(entry.pid) : undefined }));
    const stopped = stoppedToolboxPids(processes, process.pid, prefix);
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    return stopped;
  } catch {
    return [];
  }
}
