// `git apply` of a source run's diff in the worker's fresh clone (spec.continueFrom), before
// the tree goes into the sandbox. The diff is what a model wrote, so git gets it on stdin, runs
// without hooks or any config of the machine, and keeps its default refusals: no path outside
// the tree, none through a symlink. New files stay untracked, as they were in the source's
// sandbox; the finalize job's `git add --intent-to-add` counts them in the follow-up's diff.
import { diffRefusal } from './diff-refusal.ts';
import { launchHere, type Launch } from './process-launcher.ts';

export type ApplyOutcome = { applied: true } | { applied: false; output: string };

export function applyDiff(dir: string, diff: string, launch: Launch = launchHere, timeoutMs = 120_000): Promise<ApplyOutcome> {
  const refusal = diffRefusal(diff);
  if (refusal) return Promise.resolve({ applied: false, output: refusal });
  return new Promise((resolve, reject) => {
    const child = launch('git', ['-c', 'core.hooksPath=/dev/null', 'apply', '--whitespace=nowarn', '-'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' },
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    // A git that exits before reading all of stdin (a corrupt patch) closes the pipe: not our error.
    child.stdin!.on('error', () => undefined);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ applied: true });
      else resolve({ applied: false, output: signal ? `git apply timed out` : stderr });
    });
    child.stdin!.end(diff);
  });
}

/** The commit checked out in `dir` (full SHA). */
export function headRevision(dir: string, launch: Launch = launchHere): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = launch('git', ['rev-parse', '--verify', 'HEAD^{commit}'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
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
