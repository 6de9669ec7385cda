// A process group as the bash tool uses one: every command and every background job runs in
// its own, so a signal to the group reaches everything it started. A group outlives its leader:
// what the command left running (`server &`) keeps it, so "the shell exited" never means
// "nothing of the command runs". Killed processes stay zombies until their new parent reaps
// them (tini in the pod, lazily elsewhere), and a zombie still answers kill(-pgid, 0): liveness
// is read from /proc, which shows the state (and the threads: process-table.ts's isLive).
import { setTimeout as delay } from 'node:timers/promises';
import { isLive, processTable } from './process-table.ts';

/** Whether any process, a zombie included, is in the group. */
export function groupExists(pgid: number | undefined): boolean {
  if (pgid === undefined) return false;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * The pids of the group's processes that are not zombies; undefined when the group exists but
 * /proc cannot be read (not Linux), so the caller must assume something lives.
 */
export async function liveGroupMembers(pgid: number | undefined): Promise<number[] | undefined> {
  // The cheap test first: most groups asked about are gone.
  if (pgid === undefined || !groupExists(pgid)) return [];
  const table = await processTable().catch(() => undefined);
  return table?.filter((entry) => entry.pgid === pgid && isLive(entry)).map((entry) => entry.pid);
}

export async function groupHasLiveProcess(pgid: number | undefined): Promise<boolean> {
  const members = await liveGroupMembers(pgid);
  return members === undefined || members.length > 0;
}

/** Waits, at most timeoutMs, until no process of the group lives; true when none does. */
export async function waitUntilGroupEnds(pgid: number | undefined, timeoutMs: number, pollMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!(await groupHasLiveProcess(pgid))) return true;
    if (Date.now() >= deadline) return false;
    await delay(pollMs);
  }
}
