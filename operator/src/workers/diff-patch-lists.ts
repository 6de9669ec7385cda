// git's own two lists of a diff's patches, `git apply --numstat -z` and the same with -R, for a
// diff no clone is at hand for (the finalize job, startPublish) or before one is made (the
// publish job). The first names each patch by its new path (a rename's or copy's target), the
// second by its old one (their source, a deletion's path): together, every path the diff
// changes, as git reads it (diff-refusal.ts numstatEntries reads them). Neither reads or writes
// a file: git runs in an empty directory of its own, outside any repository, with no config of
// the machine's (isolated-git-environment.ts) and held to the memory limit (git-runner.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { GIT_MEMORY_LIMIT_BYTES } from './git-limits.ts';
import { GitOutOfMemoryError, runGit } from './git-runner.ts';
import { isolatedGitEnvironment } from './isolated-git-environment.ts';
import { launchHere, type Launch } from './process-launcher.ts';

/** `git apply --numstat -z` of a diff, and the same with -R. */
export interface DiffPatchLists {
  forward: string;
  reversed: string;
}

export interface DiffPatchListLimits {
  launch?: Launch | undefined;
  /** Each git's (git-limits.ts); default GIT_MEMORY_LIMIT_BYTES. */
  maxGitMemoryBytes?: number | undefined;
}

const TIMEOUT_MS = 120_000;
/** numstat prints less than the diff holds, and a kept diff is at most 1 MiB. */
const OUTPUT_MAX_BYTES = 4 * 1024 * 1024;

/** The lists, or why git could not read the diff (its error, on one line, bounded). */
export async function listDiffPatches(diff: string, limits: DiffPatchListLimits = {}): Promise<DiffPatchLists | { failed: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'chamvi-diff-paths-'));
  try {
    const list = (reversed: boolean) => numstatIn(dir, diff, reversed, limits);
    const forward = await list(false);
    if (typeof forward !== 'string') return forward;
    const reversed = await list(true);
    if (typeof reversed !== 'string') return reversed;
    return { forward, reversed };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function numstatIn(dir: string, diff: string, reversed: boolean, limits: DiffPatchListLimits): Promise<string | { failed: string }> {
  const chunks: Buffer[] = [];
  let printed = 0;
  const label = reversed ? 'apply -R --numstat' : 'apply --numstat';
  try {
    const exit = await runGit({
      launch: limits.launch ?? launchHere,
      cwd: dir,
      // No repository is looked for above the empty directory: git reads the diff alone.
      env: { ...isolatedGitEnvironment(), GIT_CEILING_DIRECTORIES: dirname(dir) },
      args: ['-c', 'core.hooksPath=/dev/null', 'apply', ...(reversed ? ['-R'] : []), '--numstat', '-z', '-'],
      memoryBytes: limits.maxGitMemoryBytes ?? GIT_MEMORY_LIMIT_BYTES,
      timeoutMs: TIMEOUT_MS,
      input: diff,
      onStdout: (chunk) => {
        printed += chunk.length;
        if (printed > OUTPUT_MAX_BYTES) return false;
        chunks.push(chunk);
        return true;
      },
      label,
    });
    if (exit.code === 0 && !exit.stopped) return Buffer.concat(chunks).toString('utf8');
    const why = exit.timedOut
      ? 'it timed out'
      : exit.stopped
        ? 'it printed too much'
        : exit.stderr.replace(/\s+/g, ' ').trim().slice(0, 300) || `it exited ${exit.code ?? exit.signal}`;
    return { failed: `git ${label} could not read the diff: ${why}` };
  } catch (error) {
    if (GitOutOfMemoryError.isInstance(error)) return { failed: error.message };
    throw error;
  }
}
