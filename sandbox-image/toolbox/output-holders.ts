// What a foreground bash command leaves running when its shell exits (`npm start &`,
// `tail -f log &`) and that still holds the command's output logs open. The call's result is
// final once it answers, and nothing watches the logs after that (a `call` process exits right
// away), so such a process would write past the cap until the home volume fills, and pruning the
// log would not free the space while it holds the file open. A terminal does the same when it
// closes: what is still attached to it is hung up. A process whose output goes elsewhere
// (`server > server.log 2>&1 &`) is left running; a long-running process belongs in a
// background job, which has a watchdog, bash_output and bash_kill.
import { readdir, stat } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { liveGroupMembers, signalGroup } from './process-group.ts';

/** A file as the kernel knows it: a log the command replaced or deleted is still the same open file. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

/** How many sweeps a process that keeps forking holders gets before the whole group is killed. */
const MAX_SWEEPS = 50;
const SWEEP_PAUSE_MS = 20;

/**
 * Kills the live processes of the group that hold one of the files open, until none is left;
 * answers whether there was any. Without /proc (not Linux) it cannot tell which of the group's
 * processes hold them, so it kills the whole group.
 */
export async function stopOutputHolders(pgid: number, files: readonly FileIdentity[]): Promise<boolean> {
  let found = false;
  for (let sweep = 0; sweep < MAX_SWEEPS; sweep += 1) {
    const members = await liveGroupMembers(pgid);
    if (members === undefined) {
      signalGroup(pgid, 'SIGKILL');
      return true;
    }
    const holders = (await Promise.all(members.map(async (pid) => ((await holdsAny(pid, files)) ? pid : undefined)))).filter(
      (pid) => pid !== undefined,
    );
    if (holders.length === 0) return found;
    found = true;
    for (const pid of holders) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    await delay(SWEEP_PAUSE_MS);
  }
  // Something forks holders faster than the sweeps kill them.
  signalGroup(pgid, 'SIGKILL');
  return true;
}

async function holdsAny(pid: number, files: readonly FileIdentity[]): Promise<boolean> {
  const descriptors = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  for (const descriptor of descriptors) {
    // stat follows the descriptor's link to the open file, even a deleted one.
    const opened = await stat(`/proc/${pid}/fd/${descriptor}`, { bigint: true }).catch(() => undefined);
    if (opened && files.some((file) => file.dev === opened.dev && file.ino === opened.ino)) return true;
  }
  return false;
}
