// Code in the sandbox can write a whole line into the toolbox's stdout, at any time: a line
// that JSON.parse would blow up to more heap than the operator has (an 8 MiB `[{},{},…]`)
// ends the session with a protocol error, as a line that is not JSON does, and the next call
// gets a new session. The toolbox is scripted here as in session-import-fallback.test.ts.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { DEFAULT_MAX_RESPONSE_BYTES, ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';

/** A valid response line of empty objects, as long as the operator accepts: ~180 MiB parsed. */
function hostileLine(id: number | undefined): Buffer {
  const prefix = Buffer.from(`{${id === undefined ? '' : `"id":${id},`}"ok":true,"result":[`);
  const suffix = Buffer.from('{}]}\n');
  const count = Math.floor((DEFAULT_MAX_RESPONSE_BYTES - prefix.length - suffix.length) / 3);
  return Buffer.concat([prefix, Buffer.alloc(count * 3, '{},'), suffix]);
}

interface ScriptedToolbox {
  process: ToolboxProcess;
  stdout: PassThrough;
  killed: boolean;
}

/** A toolbox whose stdout the test writes; `answer` replies to each request line. */
function scriptedToolbox(answer: (request: { id?: number; tool: string }, stdout: PassThrough) => void): ScriptedToolbox {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exit = resolve));
  const toolbox: ScriptedToolbox = {
    stdout,
    killed: false,
    process: {
      stdin,
      stdout,
      stderr: new PassThrough(),
      exited,
      kill: () => {
        toolbox.killed = true;
        exit({ code: null, signal: 'SIGKILL' });
      },
    },
  };
  const splitter = new LineSplitter(1_000_000, {
    line: (line) => answer(JSON.parse(line) as { id?: number; tool: string }, stdout),
    oversized: () => undefined,
  });
  stdin.on('data', (chunk: Buffer) => splitter.push(chunk));
  stdin.on('finish', () => exit({ code: 0, signal: null }));
  return toolbox;
}

const honest = (request: { id?: number; tool: string }, stdout: PassThrough) =>
  stdout.write(
    `${JSON.stringify({ ...(request.id === undefined ? {} : { id: request.id }), ok: true, result: { tool: request.tool } })}\n`,
  );

/** A transport handing out the given toolboxes in turn, recording each start. */
function transportOf(toolboxes: ScriptedToolbox[]): { transport: ToolboxTransport; starts: string[] } {
  const starts: string[] = [];
  const transport: ToolboxTransport = {
    start: (args) => {
      starts.push(args.join(' '));
      const next = toolboxes.shift();
      return next ? Promise.resolve(next.process) : Promise.reject(new Error('no toolbox left'));
    },
  };
  return { transport, starts };
}

const until = async (condition: () => boolean) => {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
};

describe('a toolbox line with more items than any answer', () => {
  it('fails the call it answers with PROTOCOL and ends the session; the next call gets a new one', async () => {
    const hostile = scriptedToolbox((request, stdout) => stdout.write(hostileLine(request.id)));
    const fresh = scriptedToolbox(honest);
    const { transport, starts } = transportOf([hostile, fresh]);
    const sandbox = new ToolboxSandbox(transport, { mode: 'serve' });
    await expect(sandbox.call({ tool: 'git_diff', input: {} })).rejects.toMatchObject({ name: 'SandboxError', reason: 'PROTOCOL' });
    expect(hostile.killed).toBe(true);
    expect(await sandbox.call({ tool: 'git_diff', input: {} })).toEqual({ ok: true, result: { tool: 'git_diff' } });
    expect(starts).toEqual(['serve', 'serve']);
    await sandbox.close();
  });

  it('ends the session when written before any call is pending', async () => {
    const hostile = scriptedToolbox(honest);
    const fresh = scriptedToolbox(honest);
    const { transport, starts } = transportOf([hostile, fresh]);
    const sandbox = new ToolboxSandbox(transport, { mode: 'serve' });
    await sandbox.open();
    hostile.stdout.write(hostileLine(99));
    await until(() => hostile.killed);
    expect(await sandbox.call({ tool: 'git_diff', input: {} })).toEqual({ ok: true, result: { tool: 'git_diff' } });
    expect(starts).toEqual(['serve', 'serve']);
    await sandbox.close();
  });

  it('fails a one-shot call with PROTOCOL', async () => {
    const hostile = scriptedToolbox((_, stdout) => stdout.write(hostileLine(undefined)));
    const { transport } = transportOf([hostile]);
    const sandbox = new ToolboxSandbox(transport, { mode: 'call' });
    await expect(sandbox.call({ tool: 'git_diff', input: {} })).rejects.toMatchObject({ name: 'SandboxError', reason: 'PROTOCOL' });
  });
});
