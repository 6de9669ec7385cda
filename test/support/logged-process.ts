// A child process whose stdout is JSON log lines (pino), collected so a test can wait for what
// it says: the base of the operator's and the egress proxy's test processes.
import { spawn, type ChildProcess } from 'node:child_process';

export interface LogLine {
  msg?: string;
  level?: number;
  [key: string]: unknown;
}

export class LoggedProcess {
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  private readonly child: ChildProcess;
  readonly exited: Promise<number | null>;

  /** `what` names the process in errors ("operator exited (1) before logging ..."). */
  constructor(
    private readonly what: string,
    args: string[],
    options: { cwd: string; env: NodeJS.ProcessEnv },
  ) {
    this.child = spawn(process.execPath, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
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
        throw new Error(`${this.what} exited (${this.child.exitCode}) before logging "${message}": ${this.stderr.join('')}`);
      if (Date.now() > deadline) throw new Error(`${this.what} did not log "${message}" within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /**
   * Signals the process and waits for it to exit, sending SIGKILL if it has not after `graceMs`
   * (past the operator's own 10 s shutdown limit). Node itself can deadlock in process.exit
   * (nodejs/node#54918: the main thread joins a V8 worker thread whose background compile waits
   * for a garbage collection only the main thread could run); an operator test caught one so,
   * stuck for an hour after its test had timed out. In a cluster the kubelet kills such a
   * process after the pod's grace period; here this does, so a test neither hangs nor leaves
   * the process behind.
   */
  async kill(signal: NodeJS.Signals = 'SIGTERM', graceMs = 15_000): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), graceMs)));
    const outcome = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (outcome !== 'late') return outcome;
    this.child.kill('SIGKILL');
    return this.exited;
  }
}
