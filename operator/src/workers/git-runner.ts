// The one way the workers start git on a repository: the clone (git-clone.ts), publishing
// (publish-git.ts), a continuation's `git apply` and the reads around it (apply-diff.ts), and
// the clone cache's look at a clone's refs (clone-cache.ts). Each reads objects a repository's
// owner made, or files a model's diff names, and a commit, a tree or a patched file is held
// whole wherever git reads it, in the operator's container whose memory every namespace's jobs
// share. So every git starts here: through the injected launcher, held to the memory limit of
// git-limits.ts (the operator's maxGitMemoryBytes) with the config that keeps a real repository
// under it, stopped at its timeout, keeping only the end of what it prints. A git that runs out
// of its memory fails alone with GitOutOfMemoryError; each caller says what that means for its run.
import { GitNotStartedError } from './errors/git-not-started-error.ts';
import { formatBytes } from './format-bytes.ts';
import { GIT_MEMORY_CONFIG, ranOutOfMemory, withLimits } from './git-limits.ts';
import { OutputTail } from './output-tail.ts';
import { LauncherLostError, type Launch, type LaunchedProcess } from './process-launcher.ts';

export interface GitCommand {
  /** Starts git (process-launcher.ts). */
  launch: Launch;
  cwd: string;
  /** git's whole environment: nothing of the operator's is added. */
  env: NodeJS.ProcessEnv;
  /** git's arguments after GIT_MEMORY_CONFIG: `-c` settings of the caller's, then the command. */
  args: readonly string[];
  /** RLIMIT_DATA of git and of each process it starts (git-limits.ts): the operator's maxGitMemoryBytes. */
  memoryBytes: number;
  /** RLIMIT_FSIZE of the same, for a git that writes what a remote sent. */
  fileBytes?: number | undefined;
  timeoutMs: number;
  /** Written to git's stdin, which is then closed; without it git's stdin is /dev/null. */
  input?: string | undefined;
  /** Hears stdout as it comes; returning false stops git (killed; the exit says `stopped`). */
  onStdout?: ((chunk: Buffer) => boolean) | undefined;
  /** The last this many bytes of stdout are kept for GitExit.stdout; none by default. */
  stdoutTailBytes?: number | undefined;
  /** git as messages name it, "git <label>"; default: the command (the first argument after the `-c` settings). */
  label?: string | undefined;
}

export interface GitExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The end of stdout, as kept (stdoutTailBytes). */
  stdout: string;
  /** The end of stderr (its last STDERR_TAIL_BYTES): git's error is its last lines. */
  stderr: string;
  /** Killed at timeoutMs. */
  timedOut: boolean;
  /** Killed because onStdout asked to stop. */
  stopped: boolean;
}

const STDERR_TAIL_BYTES = 8000;

/**
 * What a git that ran out of its memory limit says, wherever it ran: the clone's, publishing's
 * and an apply's messages all start with it, and add what it means for their run.
 */
export function gitOutOfMemoryMessage(label: string, limitBytes: number): string {
  return `git ${label} needed more than the ${formatBytes(limitBytes)} of memory each git the operator runs may have`;
}

/** git ran out of the memory it may have (git-limits.ts): what it read is larger than the limit, and will be on every try. */
export class GitOutOfMemoryError extends Error {
  override readonly name = 'GitOutOfMemoryError';

  constructor(
    readonly label: string,
    readonly limitBytes: number,
  ) {
    super(gitOutOfMemoryMessage(label, limitBytes));
  }

  static isInstance(error: unknown): error is GitOutOfMemoryError {
    return error instanceof GitOutOfMemoryError;
  }
}

/** The command among git's arguments: the first after the `-c name=value` settings. */
function commandOf(args: readonly string[]): string {
  let index = 0;
  while (args[index] === '-c') index += 2;
  return args[index] ?? 'git';
}

/** The code of a spawn's error (ENOENT, ERR_INVALID_ARG_VALUE), when it has one. */
function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Runs git to its end and resolves with how it ended, whatever its exit code: each caller
 * words a failure its own way. Rejects with GitOutOfMemoryError when git (not a remote) said it
 * ran out of memory, and with GitNotStartedError when git did not start, naming only the error's
 * code: node's message for an environment it refuses quotes the value, the clone's token. A
 * LauncherLostError is rejected as it is: it says nothing of the repository, the job is retried.
 * What `launch` itself throws (a closed launcher at shutdown) is thrown at once, as it was
 * thrown: no git ran, and it is not the repository's failure either; but node's refusal of
 * the arguments or the environment (an ERR_ code: a NUL in a value) is git not starting, which
 * every try would meet again.
 */
export function runGit(command: GitCommand): Promise<GitExit> {
  const keepStdout = command.onStdout !== undefined || command.stdoutTailBytes !== undefined;
  const label = command.label ?? commandOf(command.args);
  let child: LaunchedProcess;
  try {
    child = command.launch(
      ...withLimits({ dataBytes: command.memoryBytes, fileBytes: command.fileBytes }, 'git', [...GIT_MEMORY_CONFIG, ...command.args]),
      {
        cwd: command.cwd,
        env: command.env,
        stdio: [command.input === undefined ? 'ignore' : 'pipe', keepStdout ? 'pipe' : 'ignore', 'pipe'],
      },
    );
  } catch (error) {
    if (codeOf(error)?.startsWith('ERR_')) return Promise.reject(new GitNotStartedError(label, codeOf(error)));
    throw error;
  }
  return new Promise((resolve, reject) => {
    const stdout = new OutputTail(command.stdoutTailBytes ?? 0);
    const stderr = new OutputTail(STDERR_TAIL_BYTES);
    let stopped = false;
    let timedOut = false;
    child.stdout?.on('data', (chunk: Buffer) => {
      if (command.stdoutTailBytes !== undefined) stdout.push(chunk);
      if (stopped || !command.onStdout || command.onStdout(chunk)) return;
      stopped = true;
      child.kill('SIGKILL');
    });
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, command.timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(LauncherLostError.isInstance(error) ? error : new GitNotStartedError(label, codeOf(error)));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const exit: GitExit = { code, signal, stdout: stdout.text(), stderr: stderr.text(), timedOut, stopped };
      if (code !== 0 && !signal && !stopped && !timedOut && ranOutOfMemory(exit.stderr))
        reject(new GitOutOfMemoryError(label, command.memoryBytes));
      else resolve(exit);
    });
    // A git that exits before reading all of stdin (a corrupt patch, a stop) closes the pipe: not an error of ours.
    child.stdin?.on('error', () => undefined);
    if (command.input !== undefined) child.stdin?.end(command.input);
  });
}
