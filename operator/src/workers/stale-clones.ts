// Clones a dead operator process left behind. A prepare job removes its clone when it ends,
// but a process that is killed mid-clone (OOM, a failed liveness probe, a node drain) cannot,
// and the chart's /tmp is an emptyDir that outlives the container: every restart would add
// the clones that were in flight, each up to maxCheckoutBytes of someone's repository, until
// the emptyDir's sizeLimit gets the pod evicted. So every clone directory names the process
// that made it, and a starting process removes those whose process is gone.
import { readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PREFIX = 'chamvi-clone-';

/** The prefix of a clone directory made by process `pid` (mkdtemp adds six characters). */
export const clonePrefix = (pid: number) => `${PREFIX}${pid}-`;

/** What clonePrefix and mkdtemp make, with the pid captured. */
const CLONE_NAME = new RegExp(`^${PREFIX}(\\d+)-[A-Za-z0-9]{6}$`);

/**
 * The clone directories among `names` that no live process owns (pure). At start this process
 * has no clone yet, so one under its own pid is a dead predecessor's: in a container the
 * operator is pid 1 again after every restart. Names of another shape are not ours to judge.
 */
export function staleCloneDirectories(names: readonly string[], ownPid: number, isAlive: (pid: number) => boolean): string[] {
  return names.filter((name) => {
    const match = CLONE_NAME.exec(name);
    if (!match) return false;
    const pid = Number(match[1]);
    return pid === ownPid || !isAlive(pid);
  });
}

/** Whether a process with this pid exists (EPERM: it does, under another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the stale clone directories in `dir` (the temp dir); returns their names. Call before any prepare job runs. */
export async function removeStaleClones(
  dir = tmpdir(),
  ownPid = process.pid,
  isAlive: (pid: number) => boolean = processAlive,
): Promise<string[]> {
  const stale = staleCloneDirectories(await readdir(dir), ownPid, isAlive);
  await Promise.all(stale.map((name) => rm(join(dir, name), { recursive: true, force: true })));
  return stale;
}
