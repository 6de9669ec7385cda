// A one-shot toolbox process (`toolbox call`, `toolbox import`) is as hostile as the rest of the
// sandbox: it may answer at once and then never read its stdin nor exit. The whole exchange is
// bounded by the deadline, an import's archive included, and a process still there shortly after
// its answer is ended; the archive's stream is closed either way. (Before, an import answered at
// once whose stdin was never read held its worker until the pod went, past its deadline.)
import { PassThrough, Readable, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { callInNewProcess, importInNewProcess } from '../../operator/src/sandbox/one-shot-call.ts';
import { STDERR_MAX_BYTES } from '../../operator/src/sandbox/stderr-tail.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';

const OPTIONS = { maxResponseBytes: 1_048_576, defaultTimeoutMs: 60_000, afterAnswerGraceMs: 50 };

/** A process whose stdin takes the first write and then is never read again, and that never exits on its own. */
function stuckProcess(answerAtOnce: string | undefined) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let exit!: (value: { code: number | null; signal: string | null }) => void;
  const state = { killed: false, firstWrite: false };
  const process: ToolboxProcess = {
    stdin: new Writable({
      highWaterMark: 1_024,
      write(_chunk, _encoding, callback) {
        if (state.firstWrite) return; // never calls back: nobody reads
        state.firstWrite = true;
        callback();
      },
    }),
    stdout,
    stderr,
    exited: new Promise((resolve) => (exit = resolve)),
    kill: () => {
      state.killed = true;
      exit({ code: null, signal: 'killed' });
      stdout.end();
    },
  };
  if (answerAtOnce) stdout.write(answerAtOnce);
  const transport: ToolboxTransport = { start: () => Promise.resolve(process) };
  return { transport, state, stderr };
}

/** An archive of many chunks that says when its stream was closed. */
function archive() {
  const source = Readable.from(
    (function* () {
      for (let index = 0; index < 64; index++) yield Buffer.alloc(65_536, 0x61);
    })(),
  );
  return source;
}

/** The outcome, or 'still pending' if it has not settled well after the bounds. */
const outcomeOf = (work: Promise<unknown>) =>
  Promise.race([
    work.then(
      (value) => ({ resolved: value }),
      (error: unknown) => ({ rejected: (error as { reason?: string }).reason }),
    ),
    new Promise((resolve) => setTimeout(() => resolve('still pending'), 3_000)),
  ]);

describe('a one-shot toolbox process', () => {
  it('answered at once on an import whose archive it never reads: the import ends after a grace, the process is ended, the archive closed', async () => {
    const { transport, state } = stuckProcess('{"ok":true,"result":{"files":1}}\n');
    const source = archive();
    const outcome = await outcomeOf(importInNewProcess(transport, source, OPTIONS, [], 500));
    expect(outcome).toEqual({ resolved: { ok: true, result: { files: 1 } } });
    expect(state.killed).toBe(true);
    expect(source.destroyed).toBe(true);
  });

  it('not answering an import whose archive it never reads: TIMEOUT at the deadline, the process ended, the archive closed', async () => {
    const { transport, state } = stuckProcess(undefined);
    const source = archive();
    expect(await outcomeOf(importInNewProcess(transport, source, OPTIONS, [], 200))).toEqual({ rejected: 'TIMEOUT' });
    expect(state.killed).toBe(true);
    expect(source.destroyed).toBe(true);
  });

  it('still there after answering a call: ended after a grace', async () => {
    const { transport, state } = stuckProcess('{"ok":true,"result":{"tool":"git_diff"}}\n');
    expect(await callInNewProcess(transport, { tool: 'git_diff', input: {} }, {}, OPTIONS)).toEqual({
      ok: true,
      result: { tool: 'git_diff' },
    });
    await new Promise((resolve) => setTimeout(resolve, OPTIONS.afterAnswerGraceMs * 4));
    expect(state.killed).toBe(true);
  });

  it('writing a blank line, which no toolbox writes: ended, and the call fails with PROTOCOL', async () => {
    const { transport, state } = stuckProcess('\n{"ok":true,"result":{}}\n');
    expect(await outcomeOf(callInNewProcess(transport, { tool: 'git_diff', input: {} }, {}, OPTIONS))).toEqual({ rejected: 'PROTOCOL' });
    expect(state.killed).toBe(true);
  });

  it('writing more than its stderr budget: ended, and the call fails with PROTOCOL', async () => {
    const { transport, state, stderr } = stuckProcess(undefined);
    const call = callInNewProcess(transport, { tool: 'git_diff', input: {} }, {}, OPTIONS);
    await new Promise((resolve) => setImmediate(resolve));
    stderr.write(Buffer.alloc(STDERR_MAX_BYTES + 1, 0x65));
    expect(await outcomeOf(call)).toEqual({ rejected: 'PROTOCOL' });
    expect(state.killed).toBe(true);
  });
});
