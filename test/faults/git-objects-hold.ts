// Holds the run's next diff take in git, for as long as a fault test needs, from the host.
//
// The take runs git on a private repository (workers/take-diff.ts): the workspace's
// .git/config, hooks and index are not read, so a core.fsmonitor hook no longer holds it. Its
// object store is the workspace's .git/objects, and git opens objects/info/alternates the first
// time it reads from it. A FIFO there: that open blocks until a writer opens the FIFO too, and
// the read after it until every writer closes it. The test is that writer: a non-blocking
// write-open succeeds only once a reader holds the FIFO (the take has started), and closing it
// gives git an empty alternates file (EOF) and lets the take go on. Before closing, the FIFO is
// removed, so no later git (the next take) finds it with no writer and blocks for good.
//
// Every git that reads the objects opens it (the diff snapshot after each step, prepare's
// import check): the agent makes the FIFO in its last tool call only (HOLD_GIT_OBJECTS), and
// the first take after that call is the one held.
import { closeSync, constants, openSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from '../support/operator-process.ts';

/** The FIFO's path in the workspace. */
const ALTERNATES = '.git/objects/info/alternates';

/** The agent's bash: the FIFO in place of the (absent) alternates file. */
export const HOLD_GIT_OBJECTS = `mkdir -p .git/objects/info && rm -f ${ALTERNATES} && mkfifo ${ALTERNATES}`;

/** A take held in git by the test holding the FIFO's write end. */
export interface GitObjectsHold {
  /** Lets the take go on (git reads an empty alternates file); later takes find no FIFO. Idempotent. */
  release(): void;
}

/**
 * Waits until git in the workspace `workspaceDir` names (undefined: no workspace yet) has opened
 * the FIFO, and keeps it held there until `release`.
 */
export async function holdGitObjects(
  workspaceDir: () => Promise<string | undefined> | string | undefined,
  timeoutMs: number,
  what: string,
): Promise<GitObjectsHold> {
  const { path, fd } = await eventually(
    async () => {
      const dir = await workspaceDir();
      if (dir === undefined) return undefined;
      const path = join(dir, ALTERNATES);
      // ENOENT: not made yet; ENXIO: made, and no git has it open yet (both retried).
      return { path, fd: openSync(path, constants.O_WRONLY | constants.O_NONBLOCK) };
    },
    timeoutMs,
    what,
  );
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      // Removed first: between the close and a removal after it, another git could open the
      // FIFO, with no writer left to let it go. The workspace may be gone already (a lost pod).
      try {
        unlinkSync(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      } finally {
        closeSync(fd);
      }
    },
  };
}
