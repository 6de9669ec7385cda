// The bounds on a toolbox answer's line from its first byte to its newline, the same for every
// reader of a toolbox's stdout: a kept session (serve-session.ts) and a one-shot process
// (one-shot-call.ts). Code in the sandbox can write into either stream and stop short of a
// newline, a byte a message: the reader then holds the line (up to an answer's 8 MiB, outside
// the heap limit) and pays its one thread for every message. The toolbox writes each answer
// line in one write, so a line that takes longer than UNFINISHED_LINE_MAX_MS or more than
// LINE_MAX_CHUNKS messages is nobody's answer, and what all readers hold in such lines
// together is bounded by the replica's budget (unfinished-line-budget.ts).
import type { LineSplitter } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import { REPLICA_UNFINISHED_LINES, type UnfinishedLineBudget } from './unfinished-line-budget.ts';

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

/** The bounds a reader of toolbox answers may be given; the replica's by default. */
export interface UnfinishedLineLimits {
  /** How long a line may take from its first byte to its newline; UNFINISHED_LINE_MAX_MS by default. */
  unfinishedLineMs?: number;
  /** What the replica's readers may hold in unfinished lines together; REPLICA_UNFINISHED_LINES by default. */
  unfinishedLines?: UnfinishedLineBudget;
}

export class UnfinishedLineWatch {
  /** Set from the first byte of a line to its newline: the line's deadline. */
  private timer: NodeJS.Timeout | undefined;
  /** The messages the unfinished line has come in so far. */
  private chunks = 0;
  private readonly budget: UnfinishedLineBudget;
  /** This reader as the replica's budget sees it; ended when its line is the oldest of too many. */
  private readonly holder = {
    evict: () =>
      this.violation(
        `held the oldest unfinished line when this replica's toolbox readers held more than ${this.budget.maxBytes} bytes in them`,
      ),
  };

  /**
   * @param splitter the reader's splitter, whose unfinished line is watched
   * @param violation ends the reader (PROTOCOL): what the toolbox did, as "the toolbox … " goes on
   */
  constructor(
    private readonly splitter: LineSplitter,
    private readonly limits: UnfinishedLineLimits,
    private readonly violation: (what: string) => void,
  ) {
    this.budget = limits.unfinishedLines ?? REPLICA_UNFINISHED_LINES;
  }

  /**
   * Before a message is split: counts it if it goes on an unfinished line. False, the
   * violation reported, when the line has come in more messages than an answer does.
   */
  admitChunk(): boolean {
    if (!this.splitter.lineUnfinished || ++this.chunks <= LINE_MAX_CHUNKS) return true;
    this.violation(`sent a line in more than ${LINE_MAX_CHUNKS} pieces`);
    return false;
  }

  /**
   * After a message was split: a line left unfinished gets its deadline (from its first byte: a
   * line that ended in the message cleared the last), and what its buffer holds is told to the budget.
   */
  watch(): void {
    if (!this.splitter.lineUnfinished) return;
    if (!this.timer) {
      const ms = this.limits.unfinishedLineMs ?? UNFINISHED_LINE_MAX_MS;
      this.timer = setTimeout(() => this.violation(`left a line unfinished for more than ${ms} ms`), ms);
      this.timer.unref();
    }
    this.budget.hold(this.holder, this.splitter.unfinishedLineBytes);
  }

  /** A line reached its newline, or the reader stopped reading: its deadline, its count of messages and its bytes in the budget go. */
  lineEnded(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.chunks = 0;
    this.budget.hold(this.holder, 0);
  }
}
