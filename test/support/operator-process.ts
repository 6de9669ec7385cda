// Runs the real operator (operator/src/main.ts) as a child process for integration and
// e2e tests, with its JSON log lines collected so tests can wait for what it says.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { operatorNodeFlags } from './operator-node-flags.ts';

const mainPath = fileURLToPath(new URL('../../operator/src/main.ts', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Security #11.1: the key that seals run state in Redis, the same for every operator a test
 * starts (as the chart's Secret gives every replica one), so a run survives an operator
 * killed and replaced, or moving to another replica.
 */
export const TEST_STATE_KEY = 'chamvi-test-state-key-0123456789abcdef0123456789abcdef';

export interface OperatorProcessOptions {
  kubeconfig: string;
  env?: Record<string, string>;
  /** A built operator bundle to run with plain node, as the image does; default main.ts through tsx. */
  entry?: string;
}

export interface LogLine {
  msg?: string;
  level?: number;
  [key: string]: unknown;
}

export class OperatorProcess {
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  private readonly child: ChildProcess;
  readonly exited: Promise<number | null>;

  constructor(options: OperatorProcessOptions) {
    this.child = spawn(process.execPath, [...operatorNodeFlags(), ...(options.entry ? [options.entry] : ['--import', 'tsx', mainPath])], {
      cwd: repoRoot,
      // The dev cluster (kwok) enforces no NetworkPolicy, so every test operator opts in to
      // unisolated sandboxes (security #11.8); a test of the refusal sets it back to 'false'.
      env: {
        ...process.env,
        KUBECONFIG: options.kubeconfig,
        CHAMVI_HTTP_PORT: '0',
        LOG_LEVEL: 'debug',
        CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'true',
        CHAMVI_STATE_KEY: TEST_STATE_KEY,
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffered = '';
    this.child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const part of parts) {
        try {
          this.lines.push(JSON.parse(part) as LogLine);
        } catch {
          this.lines.push({ msg: part });
        }
      }
    });
    this.child.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  logged(message: string): LogLine[] {
    return this.lines.filter((line) => line.msg === message);
  }

  async waitForLog(message: string, timeoutMs = 30_000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find((line) => line.msg === message);
      if (found) return found;
      if (this.child.exitCode !== null)
        throw new Error(`operator exited (${this.child.exitCode}) before logging "${message}": ${this.stderr.join('')}`);
      if (Date.now() > deadline) throw new Error(`operator did not log "${message}" within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}

/** Polls `check` until it returns a value (not undefined) or the time runs out. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 30_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
