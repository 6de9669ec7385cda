// Who answers a local run's approvals. On a terminal, the person at it: the call is shown
// and a y/N question asked (a "no" asks for a reason, which the model reads). Without a
// terminal (stdin is a pipe or a file, as in CI) nobody can answer, so every gated call is
// denied with the reason "no terminal to approve on" and the run goes on without it.
// Security #11.5: the question shows the whole input (escaped: it is the model's text), and
// the answer names the sha256 of what was shown, which the resume job checks against the
// input it runs.
import { createInterface } from 'node:readline/promises';
import type { ApprovalAnswer } from '../../reconcile/run-agent.ts';
import { approvalInputSha256 } from '../../reconcile/approval-answer.ts';
import { blankRunsCounted, escapeForDisplay } from '../display-escape.ts';

export interface ApprovalRequest {
  runName: string;
  id: string;
  toolName: string;
  /** The call's whole input as JSON (status.pendingApproval.input). */
  input: string;
  /** What is asked about when it is not a tool call of the model's, e.g. "spec.sandbox.setup". */
  subject?: string;
  /** Said under the input, e.g. what the model changed that a check will run. */
  note?: string;
}

/** Answers one request; gives up (rejects) when the signal aborts. */
export type Approver = (request: ApprovalRequest, signal: AbortSignal) => Promise<ApprovalAnswer>;

export const NO_TERMINAL_REASON = 'no terminal to approve on';
export const DENIED_AT_TERMINAL = 'denied at the terminal';

export const denyWithoutTerminal: Approver = async (request) => ({ id: request.id, decision: 'deny', reason: NO_TERMINAL_REASON });

export interface TerminalApproverOptions {
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  /** True on a TTY: readline then handles the keys, Ctrl-C included. */
  terminal: boolean;
  /** Ctrl-C at the question (readline catches it on a TTY): stop the run as a SIGINT would. */
  onInterrupt?: () => void;
  /** An answer this soon after the question is printed was typed before it: TYPE_AHEAD_MS unless a test gives it. */
  typeAheadMs?: number;
  /** Milliseconds, for typeAheadMs: Date.now unless a test gives it. */
  now?: () => number;
}

/**
 * Security #11.5: how soon after the question an answer counts as typed before it. A "y⏎"
 * typed at a question spec.approval.timeout withdrew was read when the next one was printed
 * (on a TTY it waits in the kernel, where no stream can drop it) and approved a call nobody
 * had seen; nobody reads a question and answers it in 300 ms. What is timed is the first key
 * of the answer's line, not its Enter: a "y" typed before the question (or left after an
 * "n⏎" it came with) sits in readline's line, and an Enter pressed later would approve it.
 */
export const TYPE_AHEAD_MS = 300;
export const TYPE_AHEAD_IGNORED = 'input typed before this question was shown was ignored';

/** Drops what a paused stream holds (a pipe's, a test's): it was typed before the question. */
function dropBuffered(input: NodeJS.ReadableStream): void {
  if (typeof input.read !== 'function') return;
  while (input.read() !== null);
}

/**
 * When the lines readline reads began: the arrival of each line's first byte, seen on the
 * input's data (a TTY's keys arrive there too, before readline decodes them). A question's
 * answer does not emit 'line', so the line ends are found here as readline finds them.
 */
class LineStarts {
  /** When the first byte of the line not yet ended arrived. */
  private started: number | undefined;
  /** When the first line ended since the last take() began. */
  private ended: number | undefined;
  /** The last chunk ended in CR: a LF first in the next is the same Enter (CRLF), as readline takes it. */
  private afterReturn = false;

  constructor(private readonly now: () => number) {}

  readonly onData = (chunk: Buffer | string): void => {
    let text = String(chunk);
    if (text === '') return;
    if (this.afterReturn && text.startsWith('\n')) text = text.slice(1);
    this.afterReturn = String(chunk).endsWith('\r');
    const at = this.now();
    if (/[\r\n]/.test(text)) {
      this.ended ??= this.started ?? at;
      this.started = undefined;
    }
    const lastEnd = Math.max(text.lastIndexOf('\r'), text.lastIndexOf('\n'));
    if (lastEnd < text.length - 1) this.started ??= at;
  };

  /** When the first line ended since the last call began; forgets it. */
  take(): number | undefined {
    const ended = this.ended;
    this.ended = undefined;
    return ended;
  }

  /** Readline's line was emptied: what was typed of it is gone. */
  clear(): void {
    this.started = undefined;
  }
}

/**
 * The input as the question shows it: escaped as code (it is the model's text, and what will
 * run: a no-break space is shown, since bash does not split a word at it), long blanks counted.
 */
export function shownInput(input: string): { text: string; escaped: number; blankRuns: number } {
  // Counted first: escaped, a run of 3000 U+3164 would be 24000 characters of <U+3164>.
  const counted = blankRunsCounted(input);
  const escaped = escapeForDisplay(counted.text, 'code');
  return { text: escaped.text, escaped: escaped.escaped, blankRuns: counted.runs };
}

export function terminalApprover(options: TerminalApproverOptions): Approver {
  const typeAheadMs = options.typeAheadMs ?? TYPE_AHEAD_MS;
  const now = options.now ?? Date.now;
  // One question at a time, each opened after the last one closed: the desk withdraws a
  // question and asks the next in the same tick, and the withdrawn one's close (raw mode off,
  // input paused) ran after the next had opened, which then never got a key.
  let previous: Promise<unknown> = Promise.resolve();
  return async (request, signal) => {
    const turn = previous.then(async () => askOne(request, signal));
    previous = turn.catch(() => undefined);
    return turn;
  };

  async function askOne(request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer> {
    signal.throwIfAborted();
    dropBuffered(options.input);
    // No prompt of its own: clearing the line (below) redraws it, and "> " would be printed.
    const lines = createInterface({ input: options.input, output: options.output, terminal: options.terminal, prompt: '' });
    const starts = new LineStarts(now);
    options.input.on('data', starts.onData);
    lines.on('SIGINT', () => options.onInterrupt?.());
    // The question never settles if the input ends first; that is a "no" with a reason.
    // Tracked here: Interface#closed is neither typed nor documented on Node 20.
    let ended = false;
    const closed = new Promise<string>((resolve) =>
      lines.once('close', () => {
        ended = true;
        resolve('\u0000closed');
      }),
    );
    const ask = async (question: string) => {
      starts.take();
      // One chunk can answer a question and end the input ("n⏎^D" pasted): readline closes
      // before the next is asked, and asking a closed interface rejects ahead of `closed`.
      if (ended) return '\u0000closed';
      return Promise.race([lines.question(question, { signal }), closed]);
    };
    try {
      const shown = shownInput(request.input);
      // The run's name and the tool's come from the manifest and the model: one line each, escaped.
      const name = (text: string) => escapeForDisplay(text, 'inline').text;
      const what = request.subject
        ? `${name(request.subject)} with ${name(request.toolName)}`
        : `${name(request.toolName)} (approval ${name(request.id)})`;
      const bytes = Buffer.byteLength(request.input, 'utf8');
      options.output.write(
        `\ncodingrun/${name(request.runName)} wants to run ${what}, input ${bytes} bytes, shown whole:\n${shown.text}\n`,
      );
      if (shown.escaped > 0)
        options.output.write(
          `(${shown.escaped} control or bidirectional characters, or blanks that are not spaces, above are shown escaped: ` +
            'ESC as ^[, a bidi override as <U+202E>, a no-break space as <U+00A0>)\n',
        );
      if (shown.blankRuns > 0) options.output.write(`(${shown.blankRuns} long run(s) of blanks above are shown counted)\n`);
      // The note holds file names the model chose: escaped as the input is.
      if (request.note) options.output.write(`${shownInput(request.note).text}\n`);
      // Said again right above the question, in case the input scrolled the first line away;
      // with its lines, so that an input taller than the screen says so.
      const lineCount = request.input.split('\n').length;
      options.output.write(
        `That is ${what} of codingrun/${name(request.runName)}, ${bytes} bytes, ${lineCount} line${lineCount === 1 ? '' : 's'}.\n`,
      );
      let askedAt = now();
      let answer = await ask('Approve? [y/N] ');
      // A line begun this soon was typed before the question: it is asked again until one begins later.
      // A line whose start was not seen counts as begun at the question.
      while (answer !== '\u0000closed' && (starts.take() ?? askedAt) - askedAt < typeAheadMs) {
        // What was typed after that line (a "y" of "n⏎y") would be shown again and read with the
        // next Enter: emptied on a TTY; without one readline's line cannot be, and keeps its start.
        if (options.terminal && !ended) {
          lines.write(null, { ctrl: true, name: 'e' });
          lines.write(null, { ctrl: true, name: 'u' });
          starts.clear();
        }
        options.output.write(`(${TYPE_AHEAD_IGNORED})\n`);
        askedAt = now();
        answer = await ask('Approve? [y/N] ');
      }
      if (answer === '\u0000closed') return { id: request.id, decision: 'deny', reason: 'no answer: the terminal input ended' };
      if (/^\s*y(es)?\s*$/i.test(answer)) return { id: request.id, decision: 'approve', sha256: approvalInputSha256(request.input) };
      const reason = await ask('Reason, for the model (Enter for none): ');
      const given = reason === '\u0000closed' ? '' : reason.trim();
      return { id: request.id, decision: 'deny', reason: given || DENIED_AT_TERMINAL };
    } finally {
      options.input.removeListener('data', starts.onData);
      lines.close();
    }
  }
}
