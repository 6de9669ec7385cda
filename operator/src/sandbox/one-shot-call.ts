// One toolbox process per request (`toolbox call` / `toolbox import`): write the request, read
// exactly one bounded response line. Used when no session is kept, and for an import into a
// toolbox older than session imports (serve-session.ts).
//
// The process is hostile like everything in the sandbox: it may answer and then neither exit
// nor read its stdin, or write on after its answer. So the whole exchange is bounded by the
// deadline, an import's archive included, and once the answer is in the process gets a short
// grace to exit (the toolbox exits right after answering: main.ts) before it is ended; what it
// writes after its answer is not read. Its answer's line has the bounds a kept session's has
// (unfinished-line-watch.ts): an import's process lives up to its deadline, minutes, and a line
// sent a byte a message held the operator's one thread for seconds.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { RunFailure } from '../api/run-failure.ts';
import { settlesWithin } from '../settles-within.ts';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { withDeadline } from './call-deadline.ts';
import { LineSplitter, type ToolboxCommand } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import { parseResponseLine } from './response-lines.ts';
import type { CallOptions, ToolRequest } from './sandbox.ts';
import { SandboxError } from './sandbox-error.ts';
import { collectStderrTail, STDERR_MAX_BYTES } from './stderr-tail.ts';
import { toolRequestLine } from './tool-request-line.ts';
import type { ToolboxProcess, ToolboxTransport } from './toolbox-transport.ts';
import { type UnfinishedLineLimits, UnfinishedLineWatch } from './unfinished-line-watch.ts';

export interface OneShotOptions extends UnfinishedLineLimits {
  maxResponseBytes: number;
  defaultTimeoutMs: number;
  /** After the answer, how long the process may take to exit (and an import's archive to go) before it is ended. */
  afterAnswerGraceMs?: number;
}

/** The toolbox exits as soon as its answer is written; a process still there after this long is ended. */
export const AFTER_ANSWER_GRACE_MS = 2_000;

export async function callInNewProcess(
  transport: ToolboxTransport,
  request: ToolRequest,
  callOptions: CallOptions,
  options: OneShotOptions,
): Promise<ToolResponse> {
  const child = await startOrFail(transport, 'call');
  const answer = readOneResponse(child, options);
  child.stdin.on('error', () => undefined); // an early exit is reported through `answer`
  child.stdin.end(toolRequestLine(request));
  try {
    return await withDeadline(answer, callOptions, options.defaultTimeoutMs, () => child.kill());
  } finally {
    endUnlessExited(child, options.afterAnswerGraceMs ?? AFTER_ANSWER_GRACE_MS);
  }
}

export async function importInNewProcess(
  transport: ToolboxTransport,
  tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream,
  options: OneShotOptions,
  prune: readonly string[] = [],
  timeoutMs?: number,
): Promise<ToolResponse> {
  const child = await startOrFail(
    transport,
    'import',
    prune.flatMap((glob) => ['--prune', glob]),
  );
  const answer = readOneResponse(child, options);
  const source = tar instanceof Readable ? tar : Readable.from(tar as AsyncIterable<Uint8Array>);
  // The toolbox may answer (a refusal) before it has read everything: that is not a write error.
  const sent = pipeline(source, child.stdin).catch(() => undefined);
  // Ended, the process reads nothing more: its stdin is torn down too, so the archive's pipeline
  // (and the file it reads) ends even when a write waits for a reader that will never come.
  const end = () => {
    child.kill();
    child.stdin.destroy();
  };
  const graceMs = options.afterAnswerGraceMs ?? AFTER_ANSWER_GRACE_MS;
  // Answered (or failed), the toolbox exits, so what is left of the archive goes or fails at
  // once: it is waited for a grace at most, and the whole of it within the deadline.
  const work = answer.finally(async () => {
    if (!(await settlesWithin(sent, graceMs))) end();
  });
  try {
    return await withDeadline(work, { timeoutMs }, options.defaultTimeoutMs, end);
  } finally {
    endUnlessExited(child, graceMs);
    // Settled by now or at once: the archive went, or the process was ended and its stdin torn down.
    await sent;
  }
}

/** Ends the process unless it exits within the grace (it answered, or was given up on). */
function endUnlessExited(child: ToolboxProcess, graceMs: number): void {
  const timer = setTimeout(() => child.kill(), graceMs);
  timer.unref();
  void child.exited.then(() => clearTimeout(timer));
}

async function startOrFail(transport: ToolboxTransport, command: ToolboxCommand, extra: readonly string[] = []): Promise<ToolboxProcess> {
  try {
    return await transport.start([command, ...extra]);
  } catch (error) {
    // A pod the transport refused for good (not what the operator asked for) ends the run as is.
    if (RunFailure.isInstance(error)) throw error;
    throw new SandboxError('TRANSPORT', `could not start the toolbox: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

function readOneResponse(child: ToolboxProcess, options: OneShotOptions): Promise<ToolResponse> {
  const { maxResponseBytes } = options;
  return new Promise<ToolResponse>((resolve, reject) => {
    let settled = false;
    const settle = (action: () => void) => {
      if (settled) return;
      settled = true;
      // Nothing more is read: an unfinished line will never end, so its bytes and deadline go.
      unfinishedLine.lineEnded();
      splitter.discard();
      action();
    };
    const stderrTail = collectStderrTail(child.stderr, {
      onOverflow: () =>
        settle(() => {
          child.kill();
          reject(
            new SandboxError(
              'PROTOCOL',
              `the toolbox wrote more than ${STDERR_MAX_BYTES} bytes to stderr; something in the sandbox wrote it`,
            ),
          );
        }),
    });
    // The first line is the answer, and nothing after it is read (nor the rest of its chunk split).
    const splitter = new LineSplitter(maxResponseBytes, {
      line: (line) => {
        settle(() => {
          try {
            resolve(parseResponseLine(line).response);
          } catch (error) {
            reject(error);
          }
        });
        return 'stop';
      },
      blank: () => {
        settle(() => {
          child.kill();
          reject(new SandboxError('PROTOCOL', 'the toolbox wrote a blank line, which answers nothing; something in the sandbox wrote it'));
        });
        return 'stop';
      },
      oversized: () =>
        settle(() => {
          child.kill();
          reject(new SandboxError('RESPONSE_TOO_LARGE', `the toolbox answer was longer than ${maxResponseBytes} bytes`));
        }),
    });
    const unfinishedLine = new UnfinishedLineWatch(splitter, options, (what) =>
      settle(() => {
        child.kill();
        reject(new SandboxError('PROTOCOL', `the toolbox ${what}; something in the sandbox wrote it`));
      }),
    );
    child.stdout.on('data', (chunk: Buffer) => {
      if (settled || !unfinishedLine.admitChunk()) return;
      splitter.push(chunk);
      if (!settled) unfinishedLine.watch();
    });
    void child.exited.then(({ code, signal }) =>
      // stdout may still hold the answer when 'exit' fires: wait for the stream to end first.
      new Promise<void>((done) => (child.stdout.readableEnded ? done() : child.stdout.once('close', done))).then(() =>
        settle(() => {
          const detail = stderrTail();
          reject(
            new SandboxError(
              code === 0 ? 'PROTOCOL' : 'TRANSPORT',
              `the toolbox exited (${code ?? signal}) without an answer${detail ? `: ${detail}` : ''}`,
            ),
          );
        }),
      ),
    );
  });
}
