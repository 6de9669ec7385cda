// Code in the sandbox can write into a kept session's stdout and stderr at any time, as fast as
// the link allows, and every byte the operator reads is its one thread's time. Output that
// answers no call ends the session with PROTOCOL at once, so such a flood costs a line and the
// next call opens a new session; the late answer of a call its caller aborted is still taken. The
// toolbox is scripted (test/support/scripted-toolbox.ts).
import type { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ServeSession } from '../../operator/src/sandbox/serve-session.ts';
import { STDERR_MAX_BYTES } from '../../operator/src/sandbox/stderr-tail.ts';
import { honest, scriptedToolbox, until } from '../support/scripted-toolbox.ts';

const LIMITS = { maxResponseBytes: 8 * 1_048_576, defaultTimeoutMs: 60_000 };
const silent = () => undefined;

/** Writes `bytes` of `line` repeated, in 64 KiB chunks, and says after how many bytes the session was no longer alive. */
function flood(stdout: NodeJS.WritableStream, session: ServeSession, line: string, bytes: number): number {
  const chunk = line.repeat(Math.ceil(65_536 / line.length));
  let written = 0;
  while (written < bytes && session.alive) {
    stdout.write(chunk);
    written += chunk.length;
  }
  return written;
}

describe('a kept session fed output that answers no call', () => {
  it('ends with PROTOCOL at the first answer line for an id never issued, and reads no more of 16 MiB of them', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, LIMITS);
    // A call waits, so the line is read (with none waiting, its first byte ends the session:
    // unfinished-toolbox-line.test.ts).
    const call = session.call({ tool: 'git_diff', input: {} });
    const written = flood(toolbox.stdout, session, `{"id":99,"ok":true,"result":[1,2,3,4,5,6,7,8,9,10]}\n`, 16 * 1_048_576);
    expect(session.alive).toBe(false);
    expect(written).toBeLessThanOrEqual(65_536 * 2);
    expect(toolbox.killed).toBe(true);
    await expect(call).rejects.toMatchObject({
      name: 'SandboxError',
      reason: 'PROTOCOL',
      message: expect.stringContaining('id 99, which no call waits for') as string,
    });
  });

  it('ends with PROTOCOL at a second answer to a call already answered', async () => {
    const toolbox = scriptedToolbox(honest);
    const session = new ServeSession(toolbox.process, LIMITS);
    expect(await session.call({ tool: 'git_diff', input: {} })).toEqual({ ok: true, result: { tool: 'git_diff' } });
    toolbox.stdout.write('{"id":1,"ok":true,"result":{"tool":"git_diff"}}\n');
    await until(() => !session.alive);
    expect(toolbox.killed).toBe(true);
  });

  it('ends with PROTOCOL at a blank line, which no toolbox writes', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, LIMITS);
    const call = session.call({ tool: 'git_diff', input: {} });
    expect(flood(toolbox.stdout, session, '\n', 16 * 1_048_576)).toBe(65_536);
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
    await expect(call).rejects.toMatchObject({ reason: 'PROTOCOL', message: expect.stringContaining('blank line') as string });
  });

  it('fails a call whose answer is oversized, then ends with PROTOCOL when the line goes on past any answer', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, { ...LIMITS, maxResponseBytes: 4_096 });
    const call = session.call({ tool: 'git_diff', input: {} });
    toolbox.stdout.write('{"id":1,"ok":true,"result":"');
    await expect(Promise.all([call, flood(toolbox.stdout, session, 'a', 64 * 1_048_576)])).rejects.toMatchObject({
      reason: 'RESPONSE_TOO_LARGE',
    });
    await until(() => !session.alive);
    expect(toolbox.killed).toBe(true);
  });

  it('ends with PROTOCOL once stderr passes its budget', async () => {
    const toolbox = scriptedToolbox(honest);
    const session = new ServeSession(toolbox.process, LIMITS);
    const stderr = toolbox.process.stderr as PassThrough;
    stderr.write(Buffer.alloc(STDERR_MAX_BYTES, 0x65));
    await new Promise((resolve) => setImmediate(resolve));
    expect(session.alive).toBe(true);
    stderr.write('e');
    await until(() => !session.alive);
    expect(toolbox.killed).toBe(true);
  });

  it('takes the late answer of a call its caller aborted, once', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, LIMITS);
    const aborting = new AbortController();
    const aborted = session.call({ tool: 'bash', input: { command: 'sleep 9' } }, { signal: aborting.signal });
    aborting.abort();
    await expect(aborted).rejects.toMatchObject({ reason: 'ABORTED' });
    toolbox.stdout.write('{"id":1,"ok":true,"result":{"exitCode":0}}\n');
    const next = session.call({ tool: 'git_diff', input: {} });
    toolbox.stdout.write('{"id":2,"ok":true,"result":{"tool":"git_diff"}}\n');
    expect(await next).toEqual({ ok: true, result: { tool: 'git_diff' } });
    expect(session.alive).toBe(true);
    toolbox.stdout.write('{"id":1,"ok":true,"result":{"exitCode":0}}\n');
    await until(() => !session.alive);
  });
});

describe('a kept session whose call gets no answer within its deadline', () => {
  // The toolbox answers every call it read (its commands are bounded), so a written call left
  // unanswered says it is stuck (stopped from inside: `kill -STOP $PPID`); kept, the session
  // made every later call wait out its deadline too.
  it('is discarded: its process is killed, its other calls fail TRANSPORT, and a late answer is not waited for', async () => {
    const toolbox = scriptedToolbox(silent);
    const session = new ServeSession(toolbox.process, LIMITS);
    const other = session.call({ tool: 'git_diff', input: {} });
    await expect(session.call({ tool: 'bash', input: { command: 'sleep 9' } }, { timeoutMs: 10 })).rejects.toMatchObject({
      reason: 'TIMEOUT',
    });
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
    await expect(other).rejects.toMatchObject({
      reason: 'TRANSPORT',
      message: expect.stringContaining('the toolbox session was discarded') as string,
    });
    await expect(session.call({ tool: 'git_diff', input: {} })).rejects.toMatchObject({ reason: 'TRANSPORT' });
  });

  it('is kept when the call timed out before its line was written (it waited its turn behind an import)', async () => {
    const toolbox = scriptedToolbox(honest);
    const session = new ServeSession(toolbox.process, LIMITS);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    async function* archive() {
      await held;
      yield Buffer.alloc(0);
    }
    const importing = session.importTree(archive(), []);
    const queued = session.call({ tool: 'git_diff', input: {} }, { timeoutMs: 10 });
    await expect(queued).rejects.toMatchObject({ reason: 'TIMEOUT', written: false });
    expect(session.alive).toBe(true);
    release();
    await importing.catch(() => undefined);
  });
});
