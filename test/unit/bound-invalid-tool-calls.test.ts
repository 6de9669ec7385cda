// The SDK's own answers to tool calls it cannot use quote the whole argument text: they are
// bounded as results are, and an oversized invalid call's input does not stay in the
// assistant message. Run against the SDK's real response messages.
import { generateText, type ModelMessage } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { boundInvalidToolCalls } from '../../operator/src/agent/bound-invalid-tool-calls.ts';
import { TOOL_RESULT_LIMIT_BYTES } from '../../operator/src/agent/bound-tool-result.ts';
import { buildToolSet } from '../../operator/src/agent/tool-definitions.ts';
import { toolboxToolDefinitions } from '../../operator/src/agent/toolbox-tool-definitions.ts';

const tools = buildToolSet(['write_file', 'bash'], toolboxToolDefinitions());
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** What the SDK answers for these raw tool calls: its response messages and the ids it marked invalid. */
async function answered(calls: { toolCallId: string; toolName: string; input: string }[]) {
  const model = new MockLanguageModelV4({
    doGenerate: async () => ({
      content: calls.map((call) => ({ type: 'tool-call' as const, ...call })),
      finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' },
      usage,
      warnings: [],
    }),
  });
  const result = await generateText({ model, messages: [{ role: 'user', content: 'go' }], tools, maxRetries: 0 });
  const invalid = new Set(result.toolCalls.filter((call) => (call as { invalid?: boolean }).invalid).map((call) => call.toolCallId));
  return { messages: result.response.messages as ModelMessage[], invalid };
}

const errorText = (messages: readonly ModelMessage[], toolCallId: string) => {
  const tool = messages.find((message) => message.role === 'tool')!;
  const part = (tool.content as { toolCallId: string; output: { type: string; value: string } }[]).find(
    (each) => each.toolCallId === toolCallId,
  )!;
  return part.output;
};
const inputOf = (messages: readonly ModelMessage[], toolCallId: string) =>
  (messages[0]!.content as { toolCallId?: string; input?: unknown }[]).find((part) => part.toolCallId === toolCallId)?.input;

describe('boundInvalidToolCalls', () => {
  it('bounds the tool error for a 200 KB write_file that is not JSON to 64 KiB, keeping its head and tail', async () => {
    const { messages, invalid } = await answered([
      { toolCallId: 'w', toolName: 'write_file', input: `{"path":"a.ts","content":"${'x'.repeat(200_000)}` },
    ]);
    expect(Buffer.byteLength(errorText(messages, 'w').value)).toBeGreaterThan(200_000);
    const bounded = boundInvalidToolCalls(messages, invalid);
    const output = errorText(bounded, 'w');
    expect(output.type).toBe('error-text');
    expect(Buffer.byteLength(output.value)).toBeLessThanOrEqual(TOOL_RESULT_LIMIT_BYTES);
    expect(output.value).toMatch(/^AI_InvalidToolInputError: Invalid input for tool write_file/);
    expect(output.value).toContain('bytes omitted');
    expect(output.value).toMatch(/Unterminated string in JSON/);
  });

  it("replaces an oversized invalid call's input by {}, as the SDK does for input it cannot parse, and keeps a small one", async () => {
    const { messages, invalid } = await answered([
      { toolCallId: 'big', toolName: 'bash', input: JSON.stringify({ command: 'y'.repeat(300_000) }) },
      { toolCallId: 'small', toolName: 'bash', input: JSON.stringify({ command: 42 }) },
      { toolCallId: 'fine', toolName: 'bash', input: JSON.stringify({ command: 'ls' }) },
    ]);
    expect(invalid).toEqual(new Set(['big', 'small']));
    const bounded = boundInvalidToolCalls(messages, invalid);
    expect(inputOf(bounded, 'big')).toEqual({});
    expect(inputOf(bounded, 'small')).toEqual({ command: 42 });
    expect(inputOf(bounded, 'fine')).toEqual({ command: 'ls' });
    expect(Buffer.byteLength(JSON.stringify(bounded))).toBeLessThan(2 * TOOL_RESULT_LIMIT_BYTES);
    expect(errorText(bounded, 'small')).toEqual(errorText(messages, 'small'));
  });

  it('leaves an answer without tool errors as it is', async () => {
    const { messages, invalid } = await answered([{ toolCallId: 'fine', toolName: 'bash', input: '{"command":"ls"}' }]);
    expect(boundInvalidToolCalls(messages, invalid)).toEqual(messages);
  });
});
