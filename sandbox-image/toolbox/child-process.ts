// Runs the helper programs the tools rely on (rg, git, grep) with bounded memory: output is
// consumed as records as it arrives, each record cut to a maximum size, and the child is
// killed as soon as the caller has seen enough.
import { spawn } from 'node:child_process';
import { trackForegroundGroup } from './foreground-groups.ts';
import { isolatedHelperGitEnvironment } from './helper-programs.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

export interface StreamRecordsOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Record separator byte: 0x0a for lines, 0x00 for -z output. */
  separator: number;
  /** Longer records are cut to this many bytes; the rest is dropped, never buffered. */
  maxRecordBytes: number;
  /** Return false to stop reading and kill the child. */
  onRecord: (record: Buffer) => boolean;
  /** Kill the child after this long (default HELPER_TIMEOUT_MS); the outcome says timedOut. */
  timeoutMs?: number;
  /** Written to the child's stdin, which is otherwise empty. */
  input?: Buffer;
  /**
   * Start the child in a process group of its own and kill the group: for a child that starts
   * the real work in children of its own (xargs), which killing the child alone would leave
   * running, holding stdout open. The group is tracked while it runs, so a toolbox told to stop
   * kills it too (foreground-groups.ts): detached, it would outlive the toolbox.
   */
  processGroup?: boolean;
  /** Aborting kills the child (its group with processGroup), as onRecord returning false does. */
  signal?: AbortSignal;
}

/** A search or listing that runs this long is stopped: the model should narrow it. */
export const HELPER_TIMEOUT_MS = 120_000;

export interface ProcessOutcome {
  exitCode: number | null;
  /** True when onRecord asked to stop. */
  stopped: boolean;
  timedOut: boolean;
  /** First bytes of stderr, for error messages. */
  stderr: string;
}

const STDERR_KEEP_BYTES = 2_048;

export function streamRecords(command: string, args: string[], options: StreamRecordsOptions): Promise<ProcessOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: options.processGroup ?? false,
    });
    const untrack = options.processGroup && child.pid !== undefined ? trackForegroundGroup(child.pid) : () => undefined;
    const signalChild = () => {
      if (options.processGroup && child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
          return;
        } catch {
          // The group is gone already; kill the child as below.
        }
      }
      child.kill('SIGKILL');
    };
    // 'close' waits for EOF on stdout and stderr, and a process the child started (a git hook's,
    // which inherits git's stderr) may hold them open long after the child is gone: once the
    // child is killed nothing more is read, so the pipes are closed here and the call settles on
    // the child's exit (or at once, if it exited already).
    let exited: { code: number | null } | undefined;
    let killed = false;
    const kill = () => {
      signalChild();
      killed = true;
      child.stdout.destroy();
      child.stderr.destroy();
      if (exited) settle(exited.code);
    };
    // A child that exits without reading all of its input must not fail the call (EPIPE).
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input);
    let stopped = false;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let overflowing = false;
    let stderr = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs ?? HELPER_TIMEOUT_MS);

    const abort = () => {
      if (stopped) return;
      stopped = true;
      kill();
    };
    if (options.signal?.aborted) abort();
    else options.signal?.addEventListener('abort', abort, { once: true });

    const emit = (record: Buffer) => {
      if (stopped) return;
      if (!options.onRecord(record)) {
        stopped = true;
        kill();
      }
    };
    child.stdout.on('data', (chunk: Buffer) => {
      let start = 0;
      while (!stopped && start < chunk.length) {
        const end = chunk.indexOf(options.separator, start);
        const piece = chunk.subarray(start, end === -1 ? chunk.length : end);
        if (!overflowing) {
          const room = options.maxRecordBytes - pendingBytes;
          if (piece.length > room) {
            pending.push(piece.subarray(0, room));
            pendingBytes += room;
            overflowing = true;
          } else {
            pending.push(piece);
            pendingBytes += piece.length;
          }
        }
        if (end === -1) break;
        emit(pending.length === 1 ? Buffer.from(pending[0] as Buffer) : Buffer.concat(pending));
        pending = [];
        pendingBytes = 0;
        overflowing = false;
        start = end + 1;
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_KEEP_BYTES) stderr += chunk.toString('utf8', 0, STDERR_KEEP_BYTES - stderr.length);
    });
    let settled = false;
    const finish = () => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      untrack();
      options.signal?.removeEventListener('abort', abort);
      return true;
    };
    child.on('error', (error) => {
      if (finish()) reject(error);
    });
    child.on('exit', (exitCode) => {
      exited = { code: exitCode };
      if (killed) settle(exitCode);
    });
    // Normally on 'close': all of the output is read by then.
    child.on('close', (exitCode) => settle(exitCode));
    function settle(exitCode: number | null): void {
      if (!finish()) return;
      if (!stopped && !timedOut && pendingBytes > 0) emit(Buffer.concat(pending));
      if (timedOut) {
        reject(
          new ToolboxError(
            'TIMEOUT',
            `${command} took longer than ${Math.round((options.timeoutMs ?? HELPER_TIMEOUT_MS) / 1000)} s; narrow the path or the pattern`,
          ),
        );
        return;
      }
      resolve({ exitCode, stopped, timedOut, stderr });
    }
  });
}

export interface CaptureResult {
  exitCode: number | null;
  stdout: string;
  truncated: boolean;
  stderr: string;
}

/** Captures at most maxChars characters of stdout (killing the child past that). */
export async function captureOutput(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; maxChars: number },
): Promise<CaptureResult> {
  let stdout = '';
  let truncated = false;
  const outcome = await streamRecords(command, args, {
    cwd: options.cwd,
    env: options.env,
    separator: 0x0a,
    maxRecordBytes: options.maxChars * 4,
    onRecord: (record) => {
      const line = `${record.toString('utf8')}\n`;
      if (stdout.length + line.length > options.maxChars) {
        stdout += line.slice(0, Math.max(0, options.maxChars - stdout.length));
        truncated = true;
        return false;
      }
      stdout += line;
      return true;
    },
  });
  return { exitCode: outcome.exitCode, stdout, truncated, stderr: outcome.stderr };
}

/**
 * Environment for git: paths are literal (":!src" is a file name, not pathspec magic), no pager or
 * prompts, and no fsmonitor hook. The hook is a program the repository's config names (code in
 * the sandbox can set it), and git runs it on every index refresh, in `git ls-files` and
 * `git status` too: a slow one held list_files, glob, grep and git_diff, and whatever it left
 * running held git's stderr (streamRecords no longer waits for that, but the run still costs).
 * The operator's diff turns it off the same way (take-diff.ts). The other programs config can
 * name for these read commands stay: the pager and external diff are off already (GIT_PAGER,
 * --no-ext-diff), and a clean filter or textconv changes what git_diff shows, so it runs, bounded
 * by the helper's deadline.
 */
export function gitEnvironment(context: Pick<ToolboxContext, 'realRoot' | 'home'>): NodeJS.ProcessEnv {
  // Nothing of the run's git settings, HOME or PATH (helper-programs.ts).
  const isolated = isolatedHelperGitEnvironment(context);
  return {
    ...isolated,
    GIT_LITERAL_PATHSPECS: '1',
    GIT_PAGER: 'cat',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    ...commandScopeConfig(
      [
        ['safe.directory', '*'],
        ['core.fsmonitor', 'false'],
      ],
      isolated,
    ),
  };
}

/**
 * The workspace may be owned by another uid than the toolbox: on a real node it is an emptyDir
 * the kubelet made as root, and git refuses such a repository ("detected dubious ownership").
 * Command-scope config is "protected", so git honours safe.directory given this way. bash gets
 * it too (with the workspace only): the model's git commands, the import check and finalize's
 * diff all run there.
 */
export function safeDirectoryEnvironment(directory: string, inherited: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return commandScopeConfig([['safe.directory', directory]], inherited);
}

/**
 * Config entries as git reads them from the environment (GIT_CONFIG_COUNT), like `git -c` for
 * every git run; to be spread over `inherited`. The sandbox's own entries (the operator's egress
 * proxy, sandbox-egress.ts) come first and stay: these are appended after them, so that for a
 * key with one value these win. An inherited count git would refuse or could not follow (not a
 * number, or naming a key or value that is not set) counts as none, and the entries after it are
 * not read: git would fail every command on it.
 */
function commandScopeConfig(entries: ReadonlyArray<readonly [string, string]>, inherited: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const first = inheritedConfigCount(inherited);
  const environment: NodeJS.ProcessEnv = { GIT_CONFIG_COUNT: String(first + entries.length) };
  for (const [offset, [key, value]] of entries.entries()) {
    environment[`GIT_CONFIG_KEY_${first + offset}`] = key;
    environment[`GIT_CONFIG_VALUE_${first + offset}`] = value;
  }
  return environment;
}

/** How many GIT_CONFIG_KEY_n/VALUE_n entries `inherited` holds that git reads; 0 when its count is unusable. */
function inheritedConfigCount(inherited: NodeJS.ProcessEnv): number {
  const text = inherited.GIT_CONFIG_COUNT ?? '';
  if (!/^[0-9]+$/.test(text)) return 0;
  const count = Number(text);
  // Each entry is two variables, so a count beyond that cannot be complete (and is not looped over).
  if (count > Object.keys(inherited).length / 2) return 0;
  for (let index = 0; index < count; index += 1) {
    if (inherited[`GIT_CONFIG_KEY_${index}`] === undefined || inherited[`GIT_CONFIG_VALUE_${index}`] === undefined) return 0;
  }
  return count;
}
