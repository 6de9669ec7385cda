// A kept session's stdin carries request lines and, between an import's request line and its
// last frame, the archive's frames: a line written in between is read as a frame count and
// ends the session ("import frame count too long"). So requests go into stdin in the order they
// were made, and a call given up on before its turn is not written at all, and its error says
// so (written: false): the worker tells the model it did not run. The toolbox here
// reads stdin as `serve` does (sandbox-image/toolbox/serve.ts): lines through the contract's
// LineSplitter, an import's frames through its FrameReader.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { FrameReader, LineSplitter } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { ServeSession } from '../../operator/src/sandbox/serve-session.ts';
import type { ToolboxProcess } from '../../operator/src/sandbox/toolbox-transport.ts';
import { UnfinishedLineBudget } from '../../operator/src/sandbox/unfinished-line-budget.ts';

/**
 * A `serve` toolbox that answers every tool call, takes every archive, and records what it read
 * in order; `stdout` lets a test write what no toolbox would.
 */
function framingToolbox() {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const read: string[] = [];
  const state = { broken: undefined as string | undefined, killed: false };
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exit = resolve));
  const answer = (id: unknown, result: unknown) => setImmediate(() => stdout.write(`${JSON.stringify({ id, ok: true, result })}\n`));
  let importing: { id: unknown; frames: FrameReader; bytes: number } | undefined;
  const splitter = new LineSplitter(1_000_000, {
    line: (line) => {
      const request = JSON.parse(line) as { id: number; tool?: string; import?: unknown };
      if (request.import) {
        read.push('import');
        importing = { id: request.id, frames: new FrameReader(), bytes: 0 };
        answer(request.id, { receiving: true });
        return 'stop'; // the bytes after this line are the archive's frames
      }
      read.push(request.tool as string);
      answer(request.id, { exitCode: 0 });
      return undefined;
    },
    oversized: () => undefined,
  });
  stdin.on('data', (received: Buffer) => {
    let chunk: Uint8Array | undefined = received;
    while (!state.broken && chunk !== undefined && chunk.length > 0) {
      if (!importing) {
        chunk = splitter.push(chunk);
        continue;
      }
      const reading = importing.frames.push(chunk);
      importing.bytes += reading.body.reduce((sum, part) => sum + part.length, 0);
      if (reading.kind === 'invalid') {
        // What `serve` does with a count line that is not one: the session cannot go on.
        state.broken = reading.message;
        stderr.write(`protocol: ${reading.message}\n`);
        exit({ code: 1, signal: null });
        return;
      }
      chunk = reading.rest;
      if (chunk === undefined) return;
      read.push(`archive of ${importing.bytes} bytes`);
      answer(importing.id, { bytes: importing.bytes });
      importing = undefined;
    }
  });
  const process: ToolboxProcess = {
    stdin,
    stdout,
    stderr,
    exited,
    kill: () => {
      state.killed = true;
      exit({ code: null, signal: 'SIGKILL' });
    },
  };
  return { process, read, state, stdout };
}

async function* archive(bytes: number): AsyncGenerator<Uint8Array> {
  yield Buffer.alloc(bytes, 0x61);
}

const OPTIONS = { maxResponseBytes: 1_048_576, defaultTimeoutMs: 5_000, unfinishedLines: new UnfinishedLineBudget(64 * 1_048_576) };

describe('the order of what a kept session writes', () => {
  it('writes a call made during an import before an import made after the call, and the session goes on', async () => {
    const toolbox = framingToolbox();
    const session = new ServeSession(toolbox.process, OPTIONS);
    const first = session.importTree(archive(9), []);
    const call = session.call({ tool: 'bash', input: { command: 'true' } });
    const second = session.importTree(archive(12), []);
    expect(await Promise.all([first, call, second])).toEqual([
      { ok: true, result: { bytes: 9 } },
      { ok: true, result: { exitCode: 0 } },
      { ok: true, result: { bytes: 12 } },
    ]);
    expect(toolbox.state.broken).toBeUndefined();
    expect(toolbox.read).toEqual(['import', 'archive of 9 bytes', 'bash', 'import', 'archive of 12 bytes']);
    expect(await session.call({ tool: 'git_diff', input: {} })).toEqual({ ok: true, result: { exitCode: 0 } });
    expect(session.alive).toBe(true);
  });

  it('writes calls and imports queued behind an import in the order they were made', async () => {
    const toolbox = framingToolbox();
    const session = new ServeSession(toolbox.process, OPTIONS);
    const made = [
      session.importTree(archive(1), []),
      session.importTree(archive(2), []),
      session.call({ tool: 'bash', input: {} }),
      session.call({ tool: 'grep', input: {} }),
      session.importTree(archive(5), []),
      session.call({ tool: 'read_file', input: {} }),
    ];
    await Promise.all(made);
    expect(toolbox.state.broken).toBeUndefined();
    expect(toolbox.read).toEqual([
      'import',
      'archive of 1 bytes',
      'import',
      'archive of 2 bytes',
      'bash',
      'grep',
      'import',
      'archive of 5 bytes',
      'read_file',
    ]);
  });

  // A call the worker gave up on (the run's deadline) ran late, beside the calls made after it.
  it('writes no call whose signal had aborted before it was made', async () => {
    const toolbox = framingToolbox();
    const session = new ServeSession(toolbox.process, OPTIONS);
    await expect(session.call({ tool: 'bash', input: { command: 'rm -rf build' } }, { signal: AbortSignal.abort() })).rejects.toMatchObject(
      {
        reason: 'ABORTED',
        written: false,
      },
    );
    expect(await session.call({ tool: 'grep', input: {} })).toEqual({ ok: true, result: { exitCode: 0 } });
    expect(toolbox.read).toEqual(['grep']);
  });

  it('writes no call queued behind an import that was aborted before its turn, nor waits for its answer', async () => {
    const toolbox = framingToolbox();
    const session = new ServeSession(toolbox.process, OPTIONS);
    let yieldArchive!: () => void;
    const gate = new Promise<void>((resolve) => (yieldArchive = resolve));
    const imported = session.importTree(
      (async function* () {
        await gate;
        yield Buffer.alloc(4, 0x61);
      })(),
      [],
    );
    const abort = new AbortController();
    const given = session.call({ tool: 'bash', input: { command: 'rm -rf build' } }, { signal: abort.signal });
    const after = session.call({ tool: 'grep', input: {} });
    await new Promise((resolve) => setTimeout(resolve, 20));
    abort.abort();
    await expect(given).rejects.toMatchObject({ reason: 'ABORTED', written: false });
    yieldArchive();
    expect(await Promise.all([imported, after])).toEqual([
      { ok: true, result: { bytes: 4 } },
      { ok: true, result: { exitCode: 0 } },
    ]);
    expect(toolbox.read).toEqual(['import', 'archive of 4 bytes', 'grep']);
    expect(session.alive).toBe(true);
    // Never written, it is never answered: an answer under its id (2) is nobody's.
    toolbox.stdout.write(`${JSON.stringify({ id: 2, ok: true, result: { exitCode: 0 } })}\n`);
    await new Promise((resolve) => setImmediate(resolve));
    expect(session.alive).toBe(false);
  });

  // Written, it may be running in the toolbox: the worker must not say it did not run.
  it('does not say a call given up on after its line was written was never written', async () => {
    const toolbox = framingToolbox();
    const session = new ServeSession(toolbox.process, OPTIONS);
    // The toolbox answers on setImmediate: the abort comes first, after the write.
    const abort = new AbortController();
    const given = session.call({ tool: 'bash', input: { command: 'sleep 60' } }, { signal: abort.signal });
    abort.abort();
    const error = await given.catch((caught: unknown) => caught);
    expect(error).toMatchObject({ reason: 'ABORTED' });
    expect((error as { written?: unknown }).written).toBeUndefined();
    expect(toolbox.read).toEqual(['bash']);
  });

  it('fails what is queued behind an import whose session died, and writes none of it', async () => {
    const toolbox = framingToolbox();
    const session = new ServeSession(toolbox.process, OPTIONS);
    // An archive that never yields: the import holds stdin until the session dies.
    const first = session.importTree(
      (async function* () {
        await new Promise(() => undefined);
        yield new Uint8Array(0);
      })(),
      [],
      { timeoutMs: 300 },
    );
    // Its own outcome is its deadline's (the archive it waits on never yields): not this test's.
    first.catch(() => undefined);
    const call = session.call({ tool: 'bash', input: {} });
    const second = session.importTree(archive(3), []);
    await new Promise((resolve) => setTimeout(resolve, 20));
    toolbox.process.kill();
    await expect(call).rejects.toMatchObject({ reason: 'TRANSPORT' });
    await expect(second).rejects.toMatchObject({ reason: 'TRANSPORT' });
    expect(toolbox.read).toEqual(['import']);
  });
});
