// executeToolCall: an answer the transport refuses as too large reaches the model as a tool
// error it can act on; any other SandboxError still propagates.
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { executeToolCall } from '../../operator/src/workers/tool-execution.ts';

const failingWith = (error: SandboxError): Sandbox => ({
  call: () => Promise.reject(error),
  importTree: () => Promise.resolve(),
  close: () => Promise.resolve(),
});

const call = { toolCallId: 'c1', toolName: 'list_files', input: {} };

describe('executeToolCall', () => {
  it('answers an oversized toolbox answer as a TOO_LARGE tool error', async () => {
    const record = await executeToolCall(failingWith(new SandboxError('RESPONSE_TOO_LARGE', 'longer than 8388608 bytes')), call);
    expect(record).toMatchObject({ toolCallId: 'c1', toolName: 'list_files', ok: false });
    expect(record.text).toMatch(/^TOO_LARGE: .*ask for less/);
  });

  it('still throws when the sandbox itself is broken', async () => {
    await expect(executeToolCall(failingWith(new SandboxError('TRANSPORT', 'the toolbox exited')), call)).rejects.toMatchObject({
      reason: 'TRANSPORT',
    });
  });
});
