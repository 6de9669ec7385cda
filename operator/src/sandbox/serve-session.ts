// A kept `toolbox serve` session: requests are multiplexed over one stdin/stdout pair by id,
// answers may arrive in any order, every answer is size-bounded, and a dead session fails its
// pending calls with SandboxError('TRANSPORT') (the caller decides whether to retry: a bash
// command is not idempotent). An archive can be imported through it too (a session import,
// contract/protocol.ts), which spares a run an exec and a toolbox start of its own.
//
// Everything in the sandbox is hostile and can write into the session's stdout and stderr at
// any time, as fast as the link allows, and each byte read costs the operator's one thread
// (every namespace's steps, the leader's lease). So output that answers no call ends the
// session (PROTOCOL): a line whose id no call waits for (nor a call its caller aborted, whose
// answer may still come), a blank line, an oversized line that goes on past any answer,
// stderr past its budget (stderr-tail.ts). What such a session can cost is then one line,
// and the next call opens a new session. The toolbox itself writes none of these.
//
// Nor does it leave a call unanswered: it bounds every command it runs and answers past that
// bound. So a written call that gets no answer within its deadline says the toolbox is stuck
// (code in the sandbox ran `kill -STOP $PPID`), and the session is discarded then (its process
// ended, its other calls failed TRANSPORT): kept, it made every later call of the run wait out
// its own deadline too, where the next call now opens a new session.
//
// Nor does it write unasked, and it writes each answer line in one write: so a byte that
// begins a line while no answer is awaited ends the session, and so does a line that takes too
// long or too many messages to reach its newline (unfinished-line-watch.ts, the same bounds as
// a one-shot process's).
//
// Requests go into stdin in the order they were made: an import holds stdin from its request
// line to its answer (the toolbox reads frames, not lines, in between), and a call or import
// made meanwhile waits its turn behind it and behind whatever was queued before it. A call
// given up on before its turn (its signal aborted, its deadline passed) is not written at all,
// and its error says so (SandboxError.written false): it did not run.
import { once } from 'node:events';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { withDeadline } from './call-deadline.ts';
import {
  encodeFrameHeader,
  encodeImportRequest,
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
import { toolRequestLine } from './tool-request-line.ts';
import type { ToolboxProcess } from './toolbox-transport.ts';
import { type UnfinishedLineLimits, UnfinishedLineWatch } from './unfinished-line-watch.ts';

export interface ServeSessionOptions extends UnfinishedLineLimits {
  maxResponseBytes: number;
  defaultTimeoutMs: number;
}

interface Pending {
  resolve(response: ToolResponse): void;
  reject(error: SandboxError): void;
  /** A session import is answered twice under one id: who waits for the second answer. */
  next?: Pending;
  /** A call's request line went into stdin: aborted, it may still be answered (once). */
  written?: boolean;
}

/**
 * Aborted calls whose answers may still come, remembered up to this many (the oldest forgotten
 * first): the toolbox answers every call, so one that left more unanswered is stuck, and its
 * late answer ends the session like any unsolicited line.
 */
const LATE_ANSWERS_KEPT = 1_024;

/**
 * How much of an answer past this session's bound is skipped before the stream is given up on.
 * No answer of the contract is longer than 8 MiB (the 5 MiB image as base64, toolbox-sandbox.ts's
 * DEFAULT_MAX_RESPONSE_BYTES); a line that goes on past twice that is nobody's answer.
 */
const SKIPPED_LINE_MAX_BYTES = 16 * 1_048_576;

/** A session import's outcome: the toolbox's answer, or 'unsupported' from a toolbox older than session imports (nothing was sent). */
export type SessionImportOutcome = ToolResponse | 'unsupported';

export class ServeSession {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private failure: SandboxError | undefined;
  private readonly died: Promise<void>;
  private markDied!: () => void;
  /**
   * Settles when stdin is free for the request queued last, or undefined while nothing is
   * queued: a request waits for it, so requests go into stdin in the order they were made.
   */
  private stdinQueue: Promise<void> | undefined;
  private readonly stderrTail: () => string;
  /** Ids of written calls their callers aborted, each answered at most once more. */
  private readonly late = new Set<number>();
  /** Bytes read while the splitter skipped the rest of an oversized line. */
  private skippedBytes = 0;
  private readonly splitter: LineSplitter;
  private readonly unfinishedLine: UnfinishedLineWatch;

  constructor(
    private readonly process: ToolboxProcess,
    private readonly options: ServeSessionOptions,
  ) {
    this.died = new Promise((resolve) => (this.markDied = resolve));
    this.stderrTail = collectStderrTail(process.stderr, {
      onOverflow: () => this.violation(`wrote more than ${STDERR_MAX_BYTES} bytes to stderr`),
    });
    // Once the session is over nothing it reads matters: the rest of a chunk is not split
    // either. Nor once no answer is awaited: what follows is then nobody's (checked below).
    const stopUnlessAwaited = () => (this.failure || !this.awaitsAnswer() ? 'stop' : undefined);
    const splitter = new LineSplitter(options.maxResponseBytes, {
      line: (line) => {
        this.unfinishedLine.lineEnded();
        if (!this.failure) this.onLine(line);
        return stopUnlessAwaited();
      },
      oversized: (prefix) => this.onOversized(prefix),
      blank: () => {
        this.unfinishedLine.lineEnded();
        this.violation('wrote a blank line, which answers nothing');
        return stopUnlessAwaited();
      },
    });
    this.splitter = splitter;
    this.unfinishedLine = new UnfinishedLineWatch(splitter, options, (what) => this.violation(what));
    process.stdout.on('data', (chunk: Buffer) => {
      if (this.failure) return;
      if (!splitter.lineUnfinished && !this.awaitsAnswer()) return this.violation('wrote while no call waited for an answer');
      if (!this.unfinishedLine.admitChunk()) return;
      if (splitter.skippingLine) {
        this.skippedBytes += chunk.length;
        if (this.skippedBytes > SKIPPED_LINE_MAX_BYTES) return this.violation(`wrote a line longer than ${SKIPPED_LINE_MAX_BYTES} bytes`);
      }
      const unread = splitter.push(chunk);
      if (this.failure) return;
      if (unread !== undefined && unread.length > 0) return this.violation('wrote on after the last answer a call waited for');
      this.unfinishedLine.watch();
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
    const line = toolRequestLine(request, id);
    // The deadline first: a call whose signal has already aborted is given up on now, and so
    // never written (writeInTurn).
    let unwritten = false;
    const bounded = withDeadline(answer, options, this.options.defaultTimeoutMs, (why) => (unwritten = !this.giveUp(id, why)));
    this.writeInTurn(id, line);
    // Given up on before its line went out, the call did not run: the worker may say so
    // (tool-execution.ts), where a call given up on while it ran may still be running.
    return bounded.catch((error: unknown) => {
      throw unwritten && SandboxError.isInstance(error) ? neverWritten(error) : error;
    });
  }

  /** Whether any answer may still come: a call waits for one, or was aborted and may be answered late. */
  private awaitsAnswer(): boolean {
    return this.pending.size > 0 || this.late.size > 0;
  }

  /**
   * A call given up on (`why`: its deadline passed, or its signal aborted): no longer waited for.
   * Whether its line was written: false only for a line that never went into stdin. Written and
   * unanswered at its deadline, the toolbox is stuck and the session is discarded; aborted, its
   * answer may still come (once).
   */
  private giveUp(id: number, why: SandboxError): boolean {
    const waiter = this.pending.get(id);
    // Answered already (the answer is on its way to the caller): it was written.
    if (!waiter) return true;
    this.pending.delete(id);
    // Never written, it is never answered: an answer with its id is then nobody's.
    if (!waiter.written) return false;
    if (why.reason === 'TIMEOUT') {
      this.discard(why);
      return true;
    }
    this.late.add(id);
    if (this.late.size > LATE_ANSWERS_KEPT) this.late.delete(this.late.values().next().value as number);
    return true;
  }

  /**
   * Writes a call's line now if stdin is free, else once every request queued before it has
   * gone; by then the call may have been given up on (aborted, timed out), and is not written:
   * a call the worker no longer waits for, run late, would run beside the calls made after it.
   */
  private writeInTurn(id: number, line: string): void {
    const write = () => {
      const waiter = this.pending.get(id);
      if (this.failure || !waiter) return;
      waiter.written = true;
      this.process.stdin.write(line);
    };
    if (!this.stdinQueue) return write();
    const { ready, release } = this.takeStdin();
    void Promise.resolve(ready).then(() => {
      write();
      release();
    });
  }

  /**
   * Queues a turn at stdin: `ready` settles once every request queued before has released its
   * turn (undefined: stdin is free now), and stdin is this request's until it calls `release`.
   * One queue for calls and imports alike: an import queued behind a call that waited out
   * another import wrote its request line first (the call's line followed a microtask later),
   * so the call's line landed where the toolbox reads the archive's frames and the session died.
   */
  private takeStdin(): { ready: Promise<void> | undefined; release: () => void } {
    const ready = this.stdinQueue;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // Nothing is written once the session died: a turn whose archive never yields again ends then too.
    const free = Promise.race([released, this.died]);
    this.stdinQueue = free;
    void free.then(() => {
      if (this.stdinQueue === free) this.stdinQueue = undefined;
    });
    return { ready, release };
  }

  /**
   * Imports an archive through the session. The request line goes first and the archive only
   * once the toolbox says it is receiving, so an older toolbox (which refuses the line) leaves
   * the archive unread for the caller's own `toolbox import`. Calls and imports made meanwhile
   * are written after its answer, in turn. Past the deadline (from its turn) the session is
   * killed: its stdin is mid-archive.
   */
  async importTree(
    archive: AsyncIterable<Uint8Array | string>,
    prune: readonly string[],
    options: CallOptions = {},
  ): Promise<SessionImportOutcome> {
    // Taken before the first await: what is made after this import waits for it.
    const turn = this.takeStdin();
    if (turn.ready) await turn.ready;
    if (this.failure) {
      turn.release();
      throw this.failure;
    }
    const work = this.sendImport(archive, prune).finally(turn.release);
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

  /**
   * A written call got no answer within its deadline: a toolbox that was stopped (SIGSTOP) keeps
   * its exec and its pipes open, so nothing else would ever end this session. Ended here, the
   * next call opens a new one.
   */
  private discard(timeout: SandboxError): void {
    if (this.failure) return;
    this.fail(
      new SandboxError(
        'TRANSPORT',
        `the toolbox session was discarded: a call got no answer in it (${timeout.message}); something in the sandbox may have stopped the toolbox`,
      ),
    );
    this.process.kill();
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
    this.unfinishedLine.lineEnded();
    this.splitter.discard();
    for (const waiter of this.pending.values()) {
      waiter.reject(error);
      waiter.next?.reject(error);
    }
    this.pending.clear();
    this.markDied();
  }
}

/** The deadline's error for a call given up on before its line was written, saying so. */
const neverWritten = (error: SandboxError): SandboxError =>
  new SandboxError(error.reason, `${error.message}; it was never sent to the toolbox`, { cause: error.cause, written: false });

/** An id from the stream, short enough to quote. */
const describeId = (id: unknown): string => `id ${String(JSON.stringify(id)).slice(0, 40)}`;
