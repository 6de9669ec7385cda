// `git apply` of a source run's diff in the worker's fresh clone (spec.continueFrom), before
// the tree goes into the sandbox. The diff is what a model wrote, so git gets it on stdin, runs
// without hooks or any config of the machine, and keeps its default refusals: no path outside
// the tree, none through a symlink. New files stay untracked, as they were in the source's
// sandbox; the finalize job's `git add --intent-to-add` counts them in the follow-up's diff.
import { diffRefusal, listedPatchesRefusal } from './diff-refusal.ts';
import { OutputTail } from './output-tail.ts';
import { launchHere, type Launch } from './process-launcher.ts';

/**
 * git's HOME: none. The clone is the repository's, and git reads attributes and ignore rules
 * from $HOME/.config/git: a HOME in the clone let the repository give them.
 */
const NO_HOME = '/nonexistent';

export type ApplyOutcome = { applied: true } | { applied: false; output: string };

export async function applyDiff(dir: string, diff: string, launch: Launch = launchHere, timeoutMs = 120_000): Promise<ApplyOutcome> {
  const refused = diffRefusal(diff);
  if (refused) return { applied: false, output: refused };
  // git's own list of the diff's patches first (it reads no file): a path patched twice, or
  // patches other than the headers name, are refused.
  const listed = await gitApply(dir, ['--numstat', '-z'], diff, launch, timeoutMs);
  if (listed.code !== 0) return { applied: false, output: listed.stderr };
  const listRefusal = listedPatchesRefusal(diff, listed.stdout);
  if (listRefusal) return { applied: false, output: listRefusal };
  const applied = await gitApply(dir, ['--whitespace=nowarn'], diff, launch, timeoutMs);
  return applied.code === 0 ? { applied: true } : { applied: false, output: applied.timedOut ? 'git apply timed out' : applied.stderr };
}

/** `git apply ARGS -` in `dir` with the diff on stdin, without hooks or the machine's config. */
function gitApply(
  dir: string,
  args: readonly string[],
  diff: string,
  launch: Launch,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const child = launch('git', ['-c', 'core.hooksPath=/dev/null', 'apply', ...args, '-'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: NO_HOME, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout = new OutputTail(4_000_000);
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    // A git that exits before reading all of stdin (a corrupt patch) closes the pipe: not our error.
    child.stdin!.on('error', () => undefined);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: stdout.text(), stderr, timedOut });
    });
    child.stdin!.end(diff);
  });
}

/** The commit checked out in `dir` (full SHA). */
export function headRevision(dir: string, launch: Launch = launchHere): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = launch('git', ['rev-parse', '--verify', 'HEAD^{commit}'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: NO_HOME, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout.trim()) : reject(new Error(`git rev-parse HEAD failed: ${stderr.trim()}`))));
  });
}
