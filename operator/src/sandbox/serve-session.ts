// A kept `toolbox serve` session: requests are multiplexed over one stdin/stdout pair by id,
// answers may arrive in any order, every answer is size-bounded, and a dead session fails its
// pending calls with SandboxError('TRANSPORT') (the caller decides whether to retry: a bash
// command is not idempotent).
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { withDeadline } from './call-deadline.ts';
import { encodeRequest, idFromLinePrefix, LineSplitter } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import { parseResponseLine } from './response-lines.ts';
import type { CallOptions, ToolRequest } from './sandbox.ts';
import { SandboxError } from './sandbox-error.ts';
import { collectStderrTail } from './stderr-tail.ts';
import type { ToolboxProcess } from './toolbox-transport.ts';

export interface ServeSessionOptions {
  maxResponseBytes: number;
  defaultTimeoutMs: number;
}

interface Pending {
  resolve(response: ToolResponse): void;
  reject(error: SandboxError): void;
}

export class ServeSession {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private failure: SandboxError | undefined;
  private readonly stderrTail: () => string;

  constructor(
    private readonly process: ToolboxProcess,
    private readonly options: ServeSessionOptions,
  ) {
    this.stderrTail = collectStderrTail(process.stderr);
    const splitter = new LineSplitter(options.maxResponseBytes, {
      line: (line) => this.onLine(line),
      oversized: (prefix) => this.onOversized(prefix),
    });
    process.stdout.on('data', (chunk: Buffer) => splitter.push(chunk));
    process.stdin.on('error', (error) =>
      this.fail(new SandboxError('TRANSPORT', 'could not write to the toolbox session', { cause: error })),
    );
    void process.exited.then(({ code, signal }) => {
      const detail = this.stderrTail();
      this.fail(new SandboxError('TRANSPORT', `the toolbox session ended (exit ${code ?? signal})${detail ? `: ${detail}` : ''}`));
    });
  }

  /** False once the session died or was closed; the owner then starts a new one. */
  get alive(): boolean {
    return this.failure === undefined;
  }

  call(request: ToolRequest, options: CallOptions = {}): Promise<ToolResponse> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    const answer = new Promise<ToolResponse>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.process.stdin.write(
      encodeRequest({
        id,
        tool: request.tool,
        input: request.input,
        callId: request.callId,
        protect: request.protect,
        clean: request.clean,
      }),
    );
    // A late answer to a forgotten id is dropped by onLine.
    return withDeadline(answer, options, this.options.defaultTimeoutMs, () => this.pending.delete(id));
  }

  /** Ends stdin so the toolbox finishes what it has and exits; kills it if it does not. */
  async close(graceMs = 2_000): Promise<void> {
    this.fail(new SandboxError('CLOSED', 'the sandbox session was closed'));
    this.process.stdin.end();
    const timer = setTimeout(() => this.process.kill(), graceMs);
    await this.process.exited;
    clearTimeout(timer);
  }

  private onLine(line: string): void {
    let parsed;
    try {
      parsed = parseResponseLine(line);
    } catch (error) {
      this.fail(error as SandboxError);
      this.process.kill();
      return;
    }
    const waiter = typeof parsed.id === 'number' ? this.pending.get(parsed.id) : undefined;
    if (!waiter) return;
    this.pending.delete(parsed.id as number);
    waiter.resolve(parsed.response);
  }

  private onOversized(prefix: string): void {
    const id = idFromLinePrefix(prefix);
    const waiter = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (!waiter) {
      // Without an id the stream cannot be trusted any more.
      this.fail(new SandboxError('PROTOCOL', 'the toolbox sent an oversized line without an id'));
      this.process.kill();
      return;
    }
    this.pending.delete(id as number);
    waiter.reject(new SandboxError('RESPONSE_TOO_LARGE', `the toolbox answer was longer than ${this.options.maxResponseBytes} bytes`));
  }

  private fail(error: SandboxError): void {
    this.failure ??= error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }
}
