// Code in the sandbox can write into a kept session's stdout through /proc/<pid>/fd/1 and stop
// short of a newline: the session then holds what it wrote (up to an answer's 8 MiB, outside the
// heap limit) and reads every message it comes in. The toolbox writes nothing unasked and each
// answer in one write, so a line begun while no answer is awaited ends the session at once, a
// line that does not end within its deadline or its count of messages ends it with PROTOCOL,
// and the replica bounds what all its sessions hold in such lines, ending the oldest holders
// first. A one-shot process (`toolbox call`, `toolbox import`) is written into the same way,
// and its answer's line has the same bounds. The toolbox is scripted
// (test/support/scripted-toolbox.ts).
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { LineSplitter } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { callInNewProcess, importInNewProcess } from '../../operator/src/sandbox/one-shot-call.ts';
import { ServeSession } from '../../operator/src/sandbox/serve-session.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';
import { UnfinishedLineBudget } from '../../operator/src/sandbox/unfinished-line-budget.ts';
import { LINE_MAX_CHUNKS, UNFINISHED_LINE_MAX_MS } from '../../operator/src/sandbox/unfinished-line-watch.ts';
import { honest, scriptedToolbox, transportOf, until } from '../support/scripted-toolbox.ts';

const MiB = 1_048_576;
const silent = () => undefined;
/** Each session gets a budget of its own unless the test shares one: the replica's is not the test's. */
const limits = (budget = new UnfinishedLineBudget(1_024 * MiB)) => ({
  maxResponseBytes: 8 * MiB,
  defaultTimeoutMs: 600_000,
  unfinishedLines: budget,
});

afterEach(() => {
  vi.useRealTimers();
});

describe('a kept session and a line that does not end', () => {
  it('ends with PROTOCOL at 64 KiB without a newline while no call is pending, holding none of it', async () => {
    const budget = new UnfinishedLineBudget(1_024 * MiB);
    const toolbox = scriptedToolbox(honest);
    const session = new ServeSession(toolbox.process, limits(budget));
    toolbox.stdout.write(Buffer.alloc(65_536, 0x61));
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
    expect(budget.heldBytes).toBe(0);
    await expect(session.call({ tool: 'git_diff', input: {} })).rejects.toMatchObject({
      name: 'SandboxError',
      reason: 'PROTOCOL',
      message: expect.stringContaining('no call waited for an answer') as string,
    });
  });

  it('ends with PROTOCOL at bytes after the last awaited answer in the same chunk, the answer itself taken', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, limits());
    const call = session.call({ tool: 'git_diff', input: {} });
    toolbox.stdout.write(`{"id":1,"ok":true,"result":{"tool":"git_diff"}}\n${'a'.repeat(65_536)}`);
    expect(await call).toEqual({ ok: true, result: { tool: 'git_diff' } });
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
  });

  it('fails a pending call with PROTOCOL when its line, begun and 1 MiB long, has no newline past the deadline', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const budget = new UnfinishedLineBudget(1_024 * MiB);
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, limits(budget));
    const call = session.call({ tool: 'read_file', input: { path: 'x' } }, { timeoutMs: 600_000 });
    const failed = expect(call).rejects.toMatchObject({
      name: 'SandboxError',
      reason: 'PROTOCOL',
      message: expect.stringContaining(`unfinished for more than ${UNFINISHED_LINE_MAX_MS} ms`) as string,
    });
    toolbox.stdout.write('{"id":1,');
    for (let sent = 0; sent < MiB; sent += 65_536) toolbox.stdout.write(Buffer.alloc(65_536, 0x61));
    expect(budget.heldBytes).toBeGreaterThanOrEqual(MiB);
    vi.advanceTimersByTime(UNFINISHED_LINE_MAX_MS - 1);
    expect(session.alive).toBe(true);
    vi.advanceTimersByTime(1);
    await failed;
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
    expect(budget.heldBytes).toBe(0);
  });

  it('takes a real 8 MiB answer that comes in many chunks within the deadline, and then the next answer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const budget = new UnfinishedLineBudget(1_024 * MiB);
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, limits(budget));
    const content = 'c'.repeat(8 * MiB - 200);
    const line = Buffer.from(`{"id":1,"ok":true,"result":{"path":"big","content":"${content}"}}\n`);
    const call = session.call({ tool: 'read_file', input: { path: 'big' } });
    // 128 chunks of 64 KiB, 70 ms apart: the line takes about 9 s of its 10.
    for (let at = 0; at < line.length; at += 65_536) {
      toolbox.stdout.write(line.subarray(at, at + 65_536));
      vi.advanceTimersByTime(70);
    }
    expect(await call).toEqual({ ok: true, result: { path: 'big', content } });
    expect(session.alive).toBe(true);
    expect(budget.heldBytes).toBe(0);
    // The next line gets a deadline of its own, from its first byte.
    const next = session.call({ tool: 'git_diff', input: {} });
    toolbox.stdout.write('{"id":2,"ok":true,');
    vi.advanceTimersByTime(UNFINISHED_LINE_MAX_MS - 1);
    toolbox.stdout.write('"result":{}}\n');
    expect(await next).toEqual({ ok: true, result: {} });
    expect(session.alive).toBe(true);
  });

  it('lets the late answer of an aborted call begin with nothing pending, and still bounds it by the deadline', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, { ...limits(), unfinishedLineMs: 50 });
    const abortedCall = async () => {
      const aborting = new AbortController();
      const call = session.call({ tool: 'bash', input: { command: 'sleep 9' } }, { signal: aborting.signal });
      aborting.abort();
      await expect(call).rejects.toMatchObject({ reason: 'ABORTED' });
    };
    await abortedCall();
    toolbox.stdout.write('{"id":1,"ok":true,');
    toolbox.stdout.write('"result":{"exitCode":0}}\n');
    expect(session.alive).toBe(true);
    await abortedCall();
    toolbox.stdout.write('{"id":2,"ok":true,');
    expect(session.alive).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
  });

  it(`fails a pending call with PROTOCOL when its line comes in more than ${LINE_MAX_CHUNKS} messages`, async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, limits());
    const call = session.call({ tool: 'git_diff', input: {} });
    toolbox.stdout.emit('data', Buffer.from('{"id":1,"ok":true,"result":"'));
    // Each message of the exec stream is a 'data' event of its own; written in a loop, a
    // PassThrough would join them.
    const byte = Buffer.from('a');
    for (let chunk = 0; chunk < LINE_MAX_CHUNKS; chunk++) toolbox.stdout.emit('data', byte);
    expect(session.alive).toBe(true);
    toolbox.stdout.emit('data', byte);
    await expect(call).rejects.toMatchObject({ reason: 'PROTOCOL', message: expect.stringContaining('pieces') as string });
    expect(toolbox.killed).toBe(true);
  });
});

describe('an oversized line for an id no call waits for', () => {
  // The session fails inside the splitter's push; the rest of the chunk must not be kept for
  // it (a piece past the bound threw out of the stream's 'data' listener, in the shared operator).
  const unfinishedLineBytes = (session: ServeSession) => (session as unknown as { splitter: LineSplitter }).splitter.unfinishedLineBytes;

  it('ends the session with PROTOCOL, holding none of the chunk, when the rest of it is past the bound', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, { ...limits(), maxResponseBytes: 1_024 });
    const call = session.call({ tool: 'read_file', input: { path: 'x' } });
    expect(() => toolbox.stdout.emit('data', Buffer.from(`{"id":99,${'x'.repeat(5_000)}`))).not.toThrow();
    expect(unfinishedLineBytes(session)).toBe(0);
    await expect(call).rejects.toMatchObject({ reason: 'PROTOCOL', message: expect.stringContaining('id 99') as string });
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
  });

  it('ends the session with PROTOCOL, holding none of the chunk, when the line passes the bound in a later chunk', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, { ...limits(), maxResponseBytes: 1_024 });
    const call = session.call({ tool: 'read_file', input: { path: 'x' } });
    toolbox.stdout.emit('data', Buffer.from(`{"id":99,${'x'.repeat(1_000)}`));
    expect(session.alive).toBe(true);
    toolbox.stdout.emit('data', Buffer.from('y'.repeat(900)));
    // Checked at once: the exit that follows the kill would discard it again.
    expect(unfinishedLineBytes(session)).toBe(0);
    await expect(call).rejects.toMatchObject({ reason: 'PROTOCOL', message: expect.stringContaining('id 99') as string });
  });
});

describe("the replica's bound on unfinished lines", () => {
  it('ends the session holding the oldest unfinished line once all hold more than the bound, and the newer answer arrives', async () => {
    const budget = new UnfinishedLineBudget(3 * MiB);
    const holding = scriptedToolbox(silent);
    const honestToolbox = scriptedToolbox(silent);
    const holder = new ServeSession(holding.process, limits(budget));
    const answering = new ServeSession(honestToolbox.process, limits(budget));
    const held = holder.call({ tool: 'bash', input: { command: 'sleep 9' } });
    const answered = answering.call({ tool: 'read_file', input: { path: 'big' } });
    holding.stdout.write(`{"id":1,"ok":true,"result":"${'h'.repeat(2 * MiB)}`);
    expect(budget.heldBytes).toBeGreaterThanOrEqual(2 * MiB);
    const content = 'c'.repeat(2 * MiB);
    const line = Buffer.from(`{"id":1,"ok":true,"result":"${content}"}\n`);
    for (let at = 0; at < line.length; at += 65_536) honestToolbox.stdout.write(line.subarray(at, at + 65_536));
    await expect(held).rejects.toMatchObject({ reason: 'PROTOCOL', message: expect.stringContaining('oldest unfinished line') as string });
    expect(holding.killed).toBe(true);
    expect(await answered).toEqual({ ok: true, result: content });
    expect(answering.alive).toBe(true);
    expect(budget.heldBytes).toBe(0);
  });

  it('counts each holder once, forgets a line that ended, and evicts in the order the lines began', () => {
    const budget = new UnfinishedLineBudget(100);
    const evicted: string[] = [];
    const holder = (name: string) => ({ evict: () => void evicted.push(name) });
    const [a, b, c] = [holder('a'), holder('b'), holder('c')];
    budget.hold(a, 40);
    budget.hold(b, 40);
    budget.hold(a, 50); // a's line grew: still the oldest
    expect(budget.heldBytes).toBe(90);
    budget.hold(b, 0); // b's line ended
    budget.hold(b, 20); // b's next line began: now the newest
    budget.hold(c, 40);
    expect(evicted).toEqual(['a']);
    expect(budget.heldBytes).toBe(60);
    budget.hold(c, 90);
    expect(evicted).toEqual(['a', 'b']);
    expect(budget.heldBytes).toBe(90);
  });
});

/** A `toolbox import` process that reads its archive and never answers unless the test writes its stdout. */
function importProcess() {
  const stdout = new PassThrough();
  const state = { killed: false };
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const process: ToolboxProcess = {
    stdin: new PassThrough().resume(),
    stdout,
    stderr: new PassThrough(),
    exited: new Promise((resolve) => (exit = resolve)),
    kill: () => {
      state.killed = true;
      exit({ code: null, signal: 'SIGKILL' });
      stdout.end();
    },
  };
  const transport: ToolboxTransport = { start: () => Promise.resolve(process) };
  return { transport, stdout, state };
}

async function* smallArchive(): AsyncGenerator<Uint8Array> {
  yield new Uint8Array(512);
}

describe("a one-shot process's answer line", () => {
  /** A deadline short of the test's own: without the line's bounds a call would end in TIMEOUT. */
  const oneShot = (budget = new UnfinishedLineBudget(1_024 * MiB)) => ({
    ...limits(budget),
    defaultTimeoutMs: 3_000,
    afterAnswerGraceMs: 50,
  });

  it('ends a call with PROTOCOL when its line comes in 40 000 one-byte messages, the process ended and nothing held', async () => {
    const budget = new UnfinishedLineBudget(1_024 * MiB);
    const toolbox = scriptedToolbox(silent);
    const { transport } = transportOf([toolbox]);
    const call = callInNewProcess(transport, { tool: 'git_diff', input: {} }, {}, oneShot(budget));
    const failed = expect(call).rejects.toMatchObject({
      name: 'SandboxError',
      reason: 'PROTOCOL',
      message: expect.stringContaining(`more than ${LINE_MAX_CHUNKS} pieces`) as string,
    });
    await until(() => toolbox.process.stdout.listenerCount('data') > 0);
    const byte = Buffer.from('a');
    for (let chunk = 0; chunk < 40_000; chunk++) toolbox.stdout.emit('data', byte);
    await failed;
    expect(toolbox.killed).toBe(true);
    expect(budget.heldBytes).toBe(0);
  });

  it('takes an honest answer that comes in a few messages, holding nothing after it', async () => {
    const budget = new UnfinishedLineBudget(1_024 * MiB);
    const toolbox = scriptedToolbox(silent);
    const { transport } = transportOf([toolbox]);
    const call = callInNewProcess(transport, { tool: 'read_file', input: { path: 'a' } }, {}, oneShot(budget));
    await until(() => toolbox.process.stdout.listenerCount('data') > 0);
    const content = 'c'.repeat(200_000);
    const line = Buffer.from(`{"ok":true,"result":{"path":"a","content":"${content}"}}\n`);
    for (let at = 0; at < line.length; at += 65_536) toolbox.stdout.emit('data', line.subarray(at, at + 65_536));
    expect(await call).toEqual({ ok: true, result: { path: 'a', content } });
    expect(budget.heldBytes).toBe(0);
  });

  it('ends an import with PROTOCOL when its answer line is left unfinished past the line deadline, well within its own', async () => {
    const { transport, stdout, state } = importProcess();
    const started = Date.now();
    const imported = importInNewProcess(transport, smallArchive(), { ...oneShot(), unfinishedLineMs: 50 }, [], 60_000);
    stdout.write('{"ok":true,"result":');
    await expect(imported).rejects.toMatchObject({
      reason: 'PROTOCOL',
      message: expect.stringContaining('unfinished for more than 50 ms') as string,
    });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(state.killed).toBe(true);
  });

  it("counts its unfinished line in the replica's budget, and is ended when it holds the oldest of too many", async () => {
    const budget = new UnfinishedLineBudget(3 * MiB);
    const { transport, stdout, state } = importProcess();
    const imported = importInNewProcess(transport, smallArchive(), oneShot(budget), [], 60_000);
    stdout.write(`{"ok":true,"result":"${'h'.repeat(2 * MiB)}`);
    await until(() => budget.heldBytes >= 2 * MiB);
    const honestToolbox = scriptedToolbox(silent);
    const session = new ServeSession(honestToolbox.process, limits(budget));
    const answered = session.call({ tool: 'read_file', input: { path: 'big' } });
    const content = 'c'.repeat(2 * MiB);
    const line = Buffer.from(`{"id":1,"ok":true,"result":"${content}"}\n`);
    for (let at = 0; at < line.length; at += 65_536) honestToolbox.stdout.write(line.subarray(at, at + 65_536));
    await expect(imported).rejects.toMatchObject({
      reason: 'PROTOCOL',
      message: expect.stringContaining('oldest unfinished line') as string,
    });
    expect(state.killed).toBe(true);
    expect(await answered).toEqual({ ok: true, result: content });
    expect(budget.heldBytes).toBe(0);
  });
});
