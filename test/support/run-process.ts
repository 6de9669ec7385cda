// Runs a program and collects its output, for tests that check what a process printed and how
// it exited. The code stays null when a signal ended it, so a test asserting an exit code
// cannot be satisfied by a crash; callers that want a number map it themselves.
import { spawn, type ChildProcess } from 'node:child_process';

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ProcessOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Written to stdin, which is then closed. Without it stdin is a pipe left open, unless `stdin: 'ignore'`. */
  input?: string;
  stdin?: 'pipe' | 'ignore';
  /** Kill it (SIGKILL) after this long; no limit unless given. */
  timeoutMs?: number;
}

export interface StartedProcess {
  child: ChildProcess;
  /** Resolves when it exits and its output is closed; rejects if it could not be started. */
  result: Promise<ProcessResult>;
  /** What it has printed to stdout so far, for a test that watches a long-running process. */
  output: () => string;
  /** What it has printed to stderr so far. */
  errorOutput: () => string;
}

export function startProcess(command: string, args: readonly string[], options: ProcessOptions = {}): StartedProcess {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: [options.input === undefined ? (options.stdin ?? 'pipe') : 'pipe', 'pipe', 'pipe'],
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs, killSignal: 'SIGKILL' as const }),
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const result = new Promise<ProcessResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  if (options.input !== undefined) {
    // The program may exit before reading all of it; its exit code tells the story.
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(options.input);
  }
  return { child, result, output: () => stdout, errorOutput: () => stderr };
}

export function runProcess(command: string, args: readonly string[], options: ProcessOptions = {}): Promise<ProcessResult> {
  return startProcess(command, args, options).result;
}
