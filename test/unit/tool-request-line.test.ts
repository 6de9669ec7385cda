// Both transports send a ToolRequest as the same line (tool-request-line.ts): a kept session
// adds its id, a process per call sends none, and every other field goes the same way. Before,
// each copied the request's fields itself, and a field added to one (operatorEnvironment) had
// to be added to the other by hand. The lines are read here as the toolbox reads them.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { decodeRequest, LineSplitter } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { callInNewProcess } from '../../operator/src/sandbox/one-shot-call.ts';
import type { ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import { ServeSession } from '../../operator/src/sandbox/serve-session.ts';
import { toolRequestLine } from '../../operator/src/sandbox/tool-request-line.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';
import { UnfinishedLineBudget } from '../../operator/src/sandbox/unfinished-line-budget.ts';

const OPTIONS = {
  maxResponseBytes: 1_048_576,
  defaultTimeoutMs: 5_000,
  afterAnswerGraceMs: 50,
  unfinishedLines: new UnfinishedLineBudget(64 * 1_048_576),
};

/** Every field a ToolRequest has, set. */
const EVERY_FIELD: ToolRequest = {
  tool: 'bash',
  input: { command: 'git diff' },
  callId: 'step-3/call-1',
  protect: ['test/**'],
  clean: 'keep-jobs',
  operatorEnvironment: true,
};

/** A toolbox that records each request line it reads and answers it; it exits when its stdin ends, as `call` does. */
function recordingToolbox() {
  const lines: string[] = [];
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exit = resolve));
  const splitter = new LineSplitter(1_000_000, {
    line: (line) => {
      lines.push(line);
      const { id } = JSON.parse(line) as { id?: unknown };
      setImmediate(() => stdout.write(`${JSON.stringify({ id, ok: true, result: { exitCode: 0 } })}\n`));
      return undefined;
    },
    oversized: () => undefined,
  });
  stdin.on('data', (chunk: Buffer) => splitter.push(chunk));
  stdin.on('end', () => setImmediate(() => exit({ code: 0, signal: null })));
  const process: ToolboxProcess = { stdin, stdout, stderr, exited, kill: () => exit({ code: null, signal: 'SIGKILL' }) };
  const transport: ToolboxTransport = { start: () => Promise.resolve(process) };
  return { process, transport, lines };
}

describe('the request line of a tool call', () => {
  it('carries every field of the request, as the toolbox reads them back', () => {
    const reading = decodeRequest(toolRequestLine(EVERY_FIELD, 7).trimEnd());
    expect(reading).toEqual({ kind: 'request', request: { id: 7, ...EVERY_FIELD } });
  });

  it('writes the id first, and leaves out what is not set, as the lines sent before', () => {
    expect(toolRequestLine({ tool: 'read_file', input: { path: 'a.txt' } }, 1)).toBe(
      '{"id":1,"tool":"read_file","input":{"path":"a.txt"}}\n',
    );
    expect(toolRequestLine({ tool: 'read_file', input: { path: 'a.txt' }, protect: [], clean: false })).toBe(
      '{"tool":"read_file","input":{"path":"a.txt"}}\n',
    );
    expect(toolRequestLine(EVERY_FIELD, 2)).toBe(
      '{"id":2,"tool":"bash","input":{"command":"git diff"},"callId":"step-3/call-1","protect":["test/**"],"clean":true,' +
        '"keepJobs":true,"operatorEnvironment":true}\n',
    );
  });

  it("sends none of the caller's object but the request's fields", () => {
    const request = { ...EVERY_FIELD, signal: 'not a field', secret: 'token' } as ToolRequest;
    expect(Object.keys(JSON.parse(toolRequestLine(request)) as object)).toEqual([
      'tool',
      'input',
      'callId',
      'protect',
      'clean',
      'keepJobs',
      'operatorEnvironment',
    ]);
  });

  it('is the same line from a kept session and from a process per call, but for the id', async () => {
    const kept = recordingToolbox();
    const session = new ServeSession(kept.process, OPTIONS);
    expect(await session.call(EVERY_FIELD)).toEqual({ ok: true, result: { exitCode: 0 } });
    await session.close();
    const oneShot = recordingToolbox();
    expect(await callInNewProcess(oneShot.transport, EVERY_FIELD, {}, OPTIONS)).toEqual({ ok: true, result: { exitCode: 0 } });

    expect(kept.lines).toHaveLength(1);
    expect(oneShot.lines).toHaveLength(1);
    const { id, ...sessionFields } = JSON.parse(kept.lines[0]!) as Record<string, unknown>;
    expect(typeof id).toBe('number');
    expect(JSON.stringify(sessionFields)).toBe(oneShot.lines[0]);
    expect(decodeRequest(oneShot.lines[0]!)).toEqual({ kind: 'request', request: { id: undefined, ...EVERY_FIELD } });
  });
});
