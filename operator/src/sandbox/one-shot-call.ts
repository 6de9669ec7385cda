// One toolbox process per request (`toolbox call` / `toolbox import`): write the request, read
// exactly one bounded response line. Used when no session is kept, and for an import into a
// toolbox older than session imports (serve-session.ts).
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { withDeadline } from './call-deadline.ts';
import { encodeRequest, LineSplitter, type ToolboxCommand } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import { parseResponseLine } from './response-lines.ts';
import type { CallOptions, ToolRequest } from './sandbox.ts';
import { SandboxError } from './sandbox-error.ts';
import { collectStderrTail } from './stderr-tail.ts';
import type { ToolboxProcess, ToolboxTransport } from './toolbox-transport.ts';

export interface OneShotOptions {
  maxResponseBytes: number;
  defaultTimeoutMs: number;
}

export async function callInNewProcess(
  transport: ToolboxTransport,
  request: ToolRequest,
  callOptions: CallOptions,
  options: OneShotOptions,
): Promise<ToolResponse> {
  const child = await startOrFail(transport, 'call');
  const answer = readOneResponse(child, options.maxResponseBytes);
  child.stdin.on('error', () => undefined); // an early exit is reported through `answer`
  child.stdin.end(
    encodeRequest({ tool: request.tool, input: request.input, callId: request.callId, protect: request.protect, clean: request.clean }),
  );
  return withDeadline(answer, callOptions, options.defaultTimeoutMs, () => child.kill());
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
  const answer = readOneResponse(child, options.maxResponseBytes);
  const source = tar instanceof Readable ? tar : Readable.from(tar as AsyncIterable<Uint8Array>);
  // The toolbox may answer (a refusal) before it has read everything: that is not a write error.
  const sent = pipeline(source, child.stdin).catch(() => undefined);
  const response = await withDeadline(answer, { timeoutMs }, options.defaultTimeoutMs, () => child.kill());
  await sent;
  return response;
}

async function startOrFail(transport: ToolboxTransport, command: ToolboxCommand, extra: readonly string[] = []): Promise<ToolboxProcess> {
  try {
    return await transport.start([command, ...extra]);
  } catch (error) {
    throw new SandboxError('TRANSPORT', `could not start the toolbox: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

function readOneResponse(child: ToolboxProcess, maxResponseBytes: number): Promise<ToolResponse> {
  const stderrTail = collectStderrTail(child.stderr);
  return new Promise<ToolResponse>((resolve, reject) => {
    let settled = false;
    const settle = (action: () => void) => {
      if (settled) return;
      settled = true;
      action();
    };
    const splitter = new LineSplitter(maxResponseBytes, {
      line: (line) =>
        settle(() => {
          try {
            resolve(parseResponseLine(line).response);
          } catch (error) {
            reject(error);
          }
        }),
      oversized: () =>
        settle(() => {
          child.kill();
          reject(new SandboxError('RESPONSE_TOO_LARGE', `the toolbox answer was longer than ${maxResponseBytes} bytes`));
        }),
    });
    child.stdout.on('data', (chunk: Buffer) => splitter.push(chunk));
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
