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

  kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}
