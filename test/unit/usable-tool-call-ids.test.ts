import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { CALL_ID_MAX_CHARS } from '../../sandbox-image/toolbox/contract/limits.ts';
import { journalKey } from '../../operator/src/workers/tool-execution.ts';
import { MAX_TOOL_CALL_ID_CHARS, usableToolCallId, withUsableToolCallIds } from '../../operator/src/workers/usable-tool-call-ids.ts';
import { runStateSchema } from '../../operator/src/workers/run-state-schema.ts';

describe("a model's tool call ids as the run keeps them", () => {
  it('keeps a provider-sized id as it came', () => {
    for (const id of ['call_abc123', 'toolu_01A09q90qw90lq917835lq9', 'x'.repeat(MAX_TOOL_CALL_ID_CHARS)]) {
      expect(usableToolCallId(id)).toBe(id);
    }
  });

  it.each([
    ['empty', ''],
    ['one past the bound', 'x'.repeat(MAX_TOOL_CALL_ID_CHARS + 1)],
    ['over the toolbox journal bound', 'x'.repeat(300)],
    ['over the state schema bound', 'x'.repeat(600)],
  ])('replaces an id that is %s with one the toolbox and the state take', (_, id) => {
    const replaced = usableToolCallId(id);
    expect(replaced).toMatch(/^call_[0-9a-f]{32}$/);
    // The toolbox refuses a journal key past its bound, at the last step maxSteps allows.
    expect(journalKey(1000, { toolCallId: replaced, toolName: 'bash', input: {} }).length).toBeLessThanOrEqual(CALL_ID_MAX_CHARS);
    expect(runStateSchema.shape.inFlight.unwrap().shape.calls.element.shape.toolCallId.safeParse(replaced).success).toBe(true);
  });

  it('gives one id the same replacement every time and two ids different ones', () => {
    const a = 'a'.repeat(200);
    const b = 'b'.repeat(200);
    expect(usableToolCallId(a)).toBe(usableToolCallId(a));
    expect(usableToolCallId(a)).not.toBe(usableToolCallId(b));
  });

  it('replaces an id in the assistant tool call and in the tool result that answers it alike', () => {
    const long = 'l'.repeat(400);
    const messages: ModelMessage[] = [
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'reading' },
          { type: 'tool-call', toolCallId: long, toolName: 'read_file', input: { path: 'a' } },
          { type: 'tool-call', toolCallId: 'short', toolName: 'read_file', input: { path: 'b' } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: long, toolName: 'read_file', output: { type: 'error-text', value: 'no such tool input' } },
        ],
      },
    ];
    const usable = withUsableToolCallIds(messages);
    const ids = usable.flatMap((message) =>
      typeof message.content === 'string' ? [] : message.content.flatMap((part) => ('toolCallId' in part ? [part.toolCallId] : [])),
    );
    expect(ids).toEqual([usableToolCallId(long), 'short', usableToolCallId(long)]);
    expect(usable[0]).toBe(messages[0]);
    // The rest of each part is kept.
    expect(usable[1]!.content).toContainEqual({ type: 'text', text: 'reading' });
    expect(usable[2]!.content).toEqual([expect.objectContaining({ output: { type: 'error-text', value: 'no such tool input' } })]);
  });

  it('returns messages whose ids are all usable as they are', () => {
    const message: ModelMessage = {
      role: 'assistant',
      content: [{ type: 'tool-call', toolCallId: 'call_1', toolName: 'bash', input: { command: 'ls' } }],
    };
    expect(withUsableToolCallIds([message])[0]).toBe(message);
  });
});
