// Code in the sandbox can write a whole line into the toolbox's stdout, at any time: a line
// that JSON.parse would blow up to more heap than the operator has (an 8 MiB `[{},{},…]`)
// ends the session with a protocol error, as a line that is not JSON does, and the next call
// gets a new session. The toolbox is scripted (test/support/scripted-toolbox.ts).
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_RESPONSE_BYTES, ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import { honest, scriptedToolbox, transportOf, until } from '../support/scripted-toolbox.ts';

/** A valid response line of empty objects, as long as the operator accepts: ~180 MiB parsed. */
function hostileLine(id: number | undefined): Buffer {
  const prefix = Buffer.from(`{${id === undefined ? '' : `"id":${id},`}"ok":true,"result":[`);
  const suffix = Buffer.from('{}]}\n');
  const count = Math.floor((DEFAULT_MAX_RESPONSE_BYTES - prefix.length - suffix.length) / 3);
  return Buffer.concat([prefix, Buffer.alloc(count * 3, '{},'), suffix]);
}

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
