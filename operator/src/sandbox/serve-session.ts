// A kept `toolbox serve` session: requests are multiplexed over one stdin/stdout pair by id,
// answers may arrive in any order, every answer is size-bounded, and a dead session fails its
// pending calls with SandboxError('TRANSPORT') (the caller decides whether to retry: a bash
// command is not idempotent). An archive can be imported through it too (a session import,
// contract/protocol.ts), which spares a run an exec and a toolbox start of its own.
import { once } from 'node:events';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { withDeadline } from './call-deadline.ts';
import {
  encodeFrameHeader,
  encodeImportRequest,
  encodeRequest,
  idFromLinePrefix,
  IMPORT_FRAME_MAX_BYTES,
  IMPORT_LAST_FRAME,
  isImportUnknown,
  LineSplitter,
} from '../../../sandbox-image/toolbox/contract/protocol.ts';
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
  /** A session import is answered twice under one id: who waits for the second answer. */
  next?: Pending;
}

/** A session import's outcome: the toolbox's answer, or 'unsupported' from a toolbox older than session imports (nothing was sent). */
export type SessionImportOutcome = ToolResponse | 'unsupported';

export class ServeSession {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private failure: SandboxError | undefined;
  private readonly died: Promise<void>;
  private markDied!: () => void;
  /** While an archive's frames are being written, a request line must wait: it would land inside the archive. */
  private importing: Promise<void> | undefined;
  private readonly stderrTail: () => string;

  constructor(
    private readonly process: ToolboxProcess,
    private readonly options: ServeSessionOptions,
  ) {
    this.died = new Promise((resolve) => (this.markDied = resolve));
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
    const line = encodeRequest({
      id,
      tool: request.tool,
      input: request.input,
      callId: request.callId,
      protect: request.protect,
      clean: request.clean,
    });
    if (this.importing) void this.afterImports().then(() => this.process.stdin.write(line));
    else this.process.stdin.write(line);
    // A late answer to a forgotten id is dropped by onLine.
    return withDeadline(answer, options, this.options.defaultTimeoutMs, () => this.pending.delete(id));
  }

  /**
   * Once no import is in flight: the one a call waited for may be followed at once by another,
   * whose request line went first, and the call's line then landed where the toolbox reads the
   * archive's frames (the session died).
   */
  private async afterImports(): Promise<void> {
    while (this.importing) await this.importing;
  }

  /**
   * Imports an archive through the session. The request line goes first and the archive only
   * once the toolbox says it is receiving, so an older toolbox (which refuses the line) leaves
   * the archive unread for the caller's own `toolbox import`. Calls made meanwhile are written
   * after the last frame. Past the deadline the session is killed: its stdin is mid-archive.
   */
  async importTree(
    archive: AsyncIterable<Uint8Array | string>,
    prune: readonly string[],
    options: CallOptions = {},
  ): Promise<SessionImportOutcome> {
    while (this.importing) await this.importing;
    if (this.failure) throw this.failure;
    let release!: () => void;
    this.importing = new Promise<void>((resolve) => (release = resolve));
    const work = this.sendImport(archive, prune).finally(() => {
      this.importing = undefined;
      release();
    });
    return withDeadline(work, options, this.options.defaultTimeoutMs, () => this.process.kill());
  }

  private async sendImport(archive: AsyncIterable<Uint8Array | string>, prune: readonly string[]): Promise<SessionImportOutcome> {
    const id = this.nextId++;
    let second!: Pending;
    const done = new Promise<ToolResponse>((resolve, reject) => (second = { resolve, reject }));
    const receiving = new Promise<ToolResponse>((resolve, reject) => this.pending.set(id, { resolve, reject, next: second }));
    let answered = false;
    void done.then(
      () => (answered = true),
      () => (answered = true),
    );
    this.process.stdin.write(encodeImportRequest(id, prune));
    const first = await receiving;
    if (!first.ok) {
      this.pending.delete(id);
      return isImportUnknown(first) ? 'unsupported' : first;
    }
    try {
      for await (const received of archive) {
        if (answered || this.failure) break; // refused early, or the session is gone
        const chunk = typeof received === 'string' ? Buffer.from(received) : received;
        for (let at = 0; at < chunk.length; at += IMPORT_FRAME_MAX_BYTES) {
          const part = chunk.subarray(at, at + IMPORT_FRAME_MAX_BYTES);
          // Corked, the frame's header and its data leave as one write: over exec, one message.
          const stdin = this.process.stdin;
          stdin.cork();
          stdin.write(encodeFrameHeader(part.length));
          const flowing = stdin.write(part);
          stdin.uncork();
          if (!flowing) await Promise.race([once(stdin, 'drain').catch(() => undefined), this.died]);
        }
      }
    } finally {
      // Also after the archive's own failure: the session reads requests again after this.
      this.process.stdin.write(IMPORT_LAST_FRAME);
    }
    return done;
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
    if (waiter.next) this.pending.set(parsed.id as number, waiter.next);
    else this.pending.delete(parsed.id as number);
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
    const error = new SandboxError('RESPONSE_TOO_LARGE', `the toolbox answer was longer than ${this.options.maxResponseBytes} bytes`);
    waiter.reject(error);
    waiter.next?.reject(error);
  }

  private fail(error: SandboxError): void {
    this.failure ??= error;
    for (const waiter of this.pending.values()) {
      waiter.reject(error);
      waiter.next?.reject(error);
    }
    this.pending.clear();
    this.markDied();
  }
}
