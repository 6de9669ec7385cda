// A kept `toolbox serve` session: requests are multiplexed over one stdin/stdout pair by id,
// answers may arrive in any order, every answer is size-bounded, and a dead session fails its
// pending calls with SandboxError('TRANSPORT') (the caller decides whether to retry: a bash
// command is not idempotent). An archive can be imported through it too (a session import,
// contract/protocol.ts), which spares a run an exec and a toolbox start of its own.
//
// Everything in the sandbox is hostile and can write into the session's stdout and stderr at
// any time, as fast as the link allows, and each byte read costs the operator's one thread
// (every namespace's steps, the leader's lease). So output that answers no call ends the
// session (PROTOCOL): a line whose id no call waits for (nor a call given up at its deadline,
// whose answer may still come), a blank line, an oversized line that goes on past any answer,
// stderr past its budget (stderr-tail.ts). What such a session can cost is then one line,
// and the next call opens a new session. The toolbox itself writes none of these.
//
// Nor does it write unasked, and it writes each answer line in one write: so a byte that
// begins a line while no answer is awaited ends the session, and so does a line that takes
// longer than UNFINISHED_LINE_MAX_MS, or more than LINE_MAX_CHUNKS messages, to reach its
// newline. Until then its bytes are held (up to an answer's 8 MiB, outside the heap limit), and
// the replica bounds what all its sessions hold that way (unfinished-line-budget.ts).
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
import { collectStderrTail, STDERR_MAX_BYTES } from './stderr-tail.ts';
import type { ToolboxProcess } from './toolbox-transport.ts';
import { REPLICA_UNFINISHED_LINES, type UnfinishedLineBudget } from './unfinished-line-budget.ts';

export interface ServeSessionOptions {
  maxResponseBytes: number;
  defaultTimeoutMs: number;
  /** How long a line may take from its first byte to its newline; UNFINISHED_LINE_MAX_MS by default. */
  unfinishedLineMs?: number;
  /** What the replica's sessions may hold in unfinished lines together; REPLICA_UNFINISHED_LINES by default. */
  unfinishedLines?: UnfinishedLineBudget;
}

interface Pending {
  resolve(response: ToolResponse): void;
  reject(error: SandboxError): void;
  /** A session import is answered twice under one id: who waits for the second answer. */
  next?: Pending;
}

/**
 * Calls given up at their deadline whose answers may still come, remembered up to this many (the
 * oldest forgotten first): the toolbox answers every call, so one that left more unanswered is
 * stuck, and its late answer ends the session like any unsolicited line.
 */
const LATE_ANSWERS_KEPT = 1_024;

/**
 * How much of an answer past this session's bound is skipped before the stream is given up on.
 * No answer of the contract is longer than 8 MiB (the 5 MiB image as base64, toolbox-sandbox.ts's
 * DEFAULT_MAX_RESPONSE_BYTES); a line that goes on past twice that is nobody's answer.
 */
const SKIPPED_LINE_MAX_BYTES = 16 * 1_048_576;

/**
 * How long a line may take from its first byte to its newline. The toolbox writes an answer
 * line in one write, and an 8 MiB one crossed the operator's exec stream in about a tenth of a
 * second (78-149 MB/s, docs/benchmarks.md "An archive through exec"); this is still met at
 * 1 MB/s, a link a hundred times slower. A line held longer is no answer being written, and
 * its bytes (up to 8 MiB) are held no longer than this.
 */
export const UNFINISHED_LINE_MAX_MS = 10_000;

/**
 * How many messages a line may come in. Each costs the operator's thread about 2 µs whatever
 * its length (a review measured 1.8-2.3 µs for one-byte messages over a WebSocket); an answer
 * written in one write comes in messages as large as the pipe reads that carry it, kilobytes
 * each (Go's io.Copy in the kubelet reads 32 KiB at a time), while a line sent a byte per
 * message would hold the thread for seconds within its deadline. An 8 MiB line in this many
 * is 256 bytes a message; the most they cost is about 70 ms.
 */
export const LINE_MAX_CHUNKS = 32_768;

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
  /** Ids of calls given up at their deadline, each answered at most once more. */
  private readonly late = new Set<number>();
  /** Bytes read while the splitter skipped the rest of an oversized line. */
  private skippedBytes = 0;
  private readonly splitter: LineSplitter;
  /** Set from the first byte of a line to its newline: the line's deadline. */
  private lineTimer: NodeJS.Timeout | undefined;
  /** The messages the unfinished line has come in so far. */
  private lineChunks = 0;
  private readonly unfinishedLines: UnfinishedLineBudget;
  /** This session as the replica's budget sees it; ended when its line is the oldest of too many. */
  private readonly lineHolder = {
    evict: () =>
      this.violation(
        `held the oldest unfinished line when this replica's sessions held more than ${this.unfinishedLines.maxBytes} bytes in them`,
      ),
  };

  constructor(
    private readonly process: ToolboxProcess,
    private readonly options: ServeSessionOptions,
  ) {
    this.died = new Promise((resolve) => (this.markDied = resolve));
    this.stderrTail = collectStderrTail(process.stderr, {
      onOverflow: () => this.violation(`wrote more than ${STDERR_MAX_BYTES} bytes to stderr`),
    });
    this.unfinishedLines = options.unfinishedLines ?? REPLICA_UNFINISHED_LINES;
    // Once the session is over nothing it reads matters: the rest of a chunk is not split
    // either. Nor once no answer is awaited: what follows is then nobody's (checked below).
    const stopUnlessAwaited = () => (this.failure || !this.awaitsAnswer() ? 'stop' : undefined);
    const splitter = new LineSplitter(options.maxResponseBytes, {
      line: (line) => {
        this.lineEnded();
        if (!this.failure) this.onLine(line);
        return stopUnlessAwaited();
      },
      oversized: (prefix) => this.onOversized(prefix),
      blank: () => {
        this.lineEnded();
        this.violation('wrote a blank line, which answers nothing');
        return stopUnlessAwaited();
      },
    });
    this.splitter = splitter;
    process.stdout.on('data', (chunk: Buffer) => {
      if (this.failure) return;
      if (splitter.lineUnfinished) {
        if (++this.lineChunks > LINE_MAX_CHUNKS) return this.violation(`sent a line in more than ${LINE_MAX_CHUNKS} pieces`);
      } else if (!this.awaitsAnswer()) {
        return this.violation('wrote while no call waited for an answer');
      }
      if (splitter.skippingLine) {
        this.skippedBytes += chunk.length;
        if (this.skippedBytes > SKIPPED_LINE_MAX_BYTES) return this.violation(`wrote a line longer than ${SKIPPED_LINE_MAX_BYTES} bytes`);
      }
      const unread = splitter.push(chunk);
      if (this.failure) return;
      if (unread !== undefined && unread.length > 0) return this.violation('wrote on after the last answer a call waited for');
      this.watchUnfinishedLine();
    });
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
    return withDeadline(answer, options, this.options.defaultTimeoutMs, () => this.giveUp(id));
  }

  /** Whether any answer may still come: a call waits for one, or was given up on and may be answered late. */
  private awaitsAnswer(): boolean {
    return this.pending.size > 0 || this.late.size > 0;
  }

  /**
   * After a chunk: a line left unfinished gets its deadline (from its first byte: a line that
   * ended in the chunk cleared the last), and what its buffer holds is told to the budget.
   */
  private watchUnfinishedLine(): void {
    if (!this.splitter.lineUnfinished) return;
    if (!this.lineTimer) {
      const ms = this.options.unfinishedLineMs ?? UNFINISHED_LINE_MAX_MS;
      this.lineTimer = setTimeout(() => this.violation(`left a line unfinished for more than ${ms} ms`), ms);
      this.lineTimer.unref();
    }
    this.unfinishedLines.hold(this.lineHolder, this.splitter.unfinishedLineBytes);
  }

  /** A line reached its newline: its deadline, its count of messages and its bytes in the budget go. */
  private lineEnded(): void {
    clearTimeout(this.lineTimer);
    this.lineTimer = undefined;
    this.lineChunks = 0;
    this.unfinishedLines.hold(this.lineHolder, 0);
  }

  /** A call past its deadline: no longer waited for, but its answer may still come (once). */
  private giveUp(id: number): void {
    if (!this.pending.delete(id)) return;
    this.late.add(id);
    if (this.late.size > LATE_ANSWERS_KEPT) this.late.delete(this.late.values().next().value as number);
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
    const id = parsed.id;
    const waiter = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (!waiter) {
      if (typeof id === 'number' && this.late.delete(id)) return; // the answer of a call given up on
      return this.violation(id === undefined ? 'answered without an id' : `answered ${describeId(id)}, which no call waits for`);
    }
    if (waiter.next) this.pending.set(id as number, waiter.next);
    else this.pending.delete(id as number);
    waiter.resolve(parsed.response);
  }

  private onOversized(prefix: string): void {
    this.skippedBytes = 0;
    const id = idFromLinePrefix(prefix);
    const waiter = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (!waiter) {
      if (typeof id === 'number' && this.late.delete(id)) return;
      // Without an id the stream cannot be trusted any more, nor with one no call waits for.
      return this.violation(
        `sent an oversized line ${id === undefined ? 'without an id' : `for ${describeId(id)}, which no call waits for`}`,
      );
    }
    this.pending.delete(id as number);
    const error = new SandboxError('RESPONSE_TOO_LARGE', `the toolbox answer was longer than ${this.options.maxResponseBytes} bytes`);
    waiter.reject(error);
    waiter.next?.reject(error);
  }

  /** Output no toolbox writes: the session ends, and the next call opens a new one. */
  private violation(what: string): void {
    if (this.failure) return;
    this.fail(new SandboxError('PROTOCOL', `the toolbox session ${what}; something in the sandbox wrote it`));
    this.process.kill();
  }

  private fail(error: SandboxError): void {
    this.failure ??= error;
    // Nothing more is read: an unfinished line will never end, so its buffer goes now.
    this.lineEnded();
    this.splitter.discard();
    for (const waiter of this.pending.values()) {
      waiter.reject(error);
      waiter.next?.reject(error);
    }
    this.pending.clear();
    this.markDied();
  }
}

/** An id from the stream, short enough to quote. */
const describeId = (id: unknown): string => `id ${String(JSON.stringify(id)).slice(0, 40)}`;
