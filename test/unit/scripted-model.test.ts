import { generateText, streamText, tool, type ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { usageOfModelCall } from '../../operator/src/agent/usage-accounting.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { ModelScriptInvalidError } from '../../operator/src/providers/errors/model-script-invalid-error.ts';
import { MAX_TURN_TOOL_CALLS, parseModelScript } from '../../operator/src/providers/scripted/model-script-schema.ts';

// The example from API.md "The scripted model", verbatim.
const API_EXAMPLE = `{"turns": [
  {"toolCalls": [{"toolName": "read_file", "input": {"path": "src/app.ts"}}],
   "usage": {"inputTokens": 1200, "outputTokens": 40}},
  {"toolCalls": [{"toolName": "edit_file",
                  "input": {"path": "src/app.ts", "oldString": "a", "newString": "b"}}],
   "usage": {"inputTokens": 1500, "outputTokens": 60, "cacheReadTokens": 1000}},
  {"text": "Changed a to b.", "usage": {"inputTokens": 1700, "outputTokens": 12}}
]}`;

const tools = {
  read_file: tool({ description: 'read', inputSchema: z.object({ path: z.string() }) }),
  edit_file: tool({ description: 'edit', inputSchema: z.object({ path: z.string(), oldString: z.string(), newString: z.string() }) }),
};

function scriptedModel(scriptText: string) {
  return createLanguageModel({ provider: 'scripted' }, { script: parseModelScript(scriptText) });
}

/** Appends a step's assistant message and a tool result for each of its calls, as the worker does. */
function continueWith(
  messages: ModelMessage[],
  result: { response: { messages: ModelMessage[] }; toolCalls: ReadonlyArray<{ toolCallId: string; toolName: string }> },
): ModelMessage[] {
  return [
    ...messages,
    ...result.response.messages,
    ...(result.toolCalls.length === 0
      ? []
      : [
          {
            role: 'tool' as const,
            content: result.toolCalls.map((call) => ({
              type: 'tool-result' as const,
              toolCallId: call.toolCallId,
              toolName: call.toolName,
              output: { type: 'text' as const, value: 'ok' },
            })),
          },
        ]),
  ];
}

describe('parseModelScript', () => {
  it('accepts the API.md example', () => {
    expect(parseModelScript(API_EXAMPLE).turns).toHaveLength(3);
  });

  it('reports JSON syntax errors', () => {
    expect(() => parseModelScript('{"turns": [')).toThrowError(/not valid JSON/);
  });

  it("never quotes the text it could not read: a run may name a ConfigMap key its author can't read", () => {
    const error = (() => {
      try {
        parseModelScript('hunter2-secret-value');
      } catch (caught) {
        return caught as Error;
      }
    })();
    expect(error?.message).toMatch(/not valid JSON/);
    expect(error?.message).not.toContain('hunter');
  });

  it('names the path of every problem, including misspelt keys and empty turns', () => {
    const error = (() => {
      try {
        parseModelScript('{"turns": [{"text": "x", "usage": {"input_tokens": 1, "outputTokens": 2}}, {}]}');
      } catch (caught) {
        return caught;
      }
    })();
    expect(ModelScriptInvalidError.isInstance(error)).toBe(true);
    const problems = (error as ModelScriptInvalidError).problems.join('\n');
    expect(problems).toContain('turns.0.usage: unknown key(s); allowed here: "inputTokens", "outputTokens"');
    expect(problems).toMatch(/turns\.1.*"text" or at least one entry in "toolCalls"/);
    expect((error as Error).message).toContain('spec.model.scriptRef');
  });

  // A run may name any ConfigMap key of its namespace: zod's "Unrecognized keys: "db_host",
  // "api_token"" told its author the keys of a ConfigMap they may not read.
  it.each([
    ['at the root', '{"db_host": "prod-db.internal", "api_token": "s3cr3t"}', '(root): unknown key(s); allowed here: "turns"'],
    ['in a turn', '{"turns": [{"text": "a", "acct_4111111111111111": 1}]}', 'turns.0: unknown key(s); allowed here: "text"'],
    [
      'in a tool call',
      '{"turns": [{"toolCalls": [{"toolName": "bash", "input": {}, "db_host": 1}]}]}',
      'turns.0.toolCalls.0: unknown key(s); allowed here: "toolName", "input"',
    ],
  ])('names no key of a script that has unknown keys %s, only the keys allowed there', (_where, text, said) => {
    const error = (() => {
      try {
        parseModelScript(text);
      } catch (caught) {
        return caught as Error;
      }
    })();
    expect(error?.message).toContain(said);
    for (const quoted of ['db_host', 'api_token', 'acct_4111111111111111', 'prod-db', 's3cr3t'])
      expect(error?.message).not.toContain(quoted);
  });

  // A 1 MiB ConfigMap holds 340 000 empty turns: the message listed every one (25 MB, logged whole).
  const refusal = (text: string): string => {
    try {
      parseModelScript(text);
    } catch (error) {
      expect(ModelScriptInvalidError.isInstance(error)).toBe(true);
      return (error as Error).message;
    }
    throw new Error('the script was accepted');
  };

  it('names the first ten problems and counts the rest', () => {
    const message = refusal(JSON.stringify({ turns: Array.from({ length: 5_000 }, () => ({})) }));
    expect(message).toContain('turns.9: a turn needs');
    expect(message).not.toContain('turns.10:');
    expect(message).toContain('; and 4990 more.');
    expect(message.length).toBeLessThan(2_000);
  });

  it('refuses a script of more than 10000 turns before checking them', () => {
    const text = JSON.stringify({ turns: Array.from({ length: 340_000 }, () => ({})) });
    expect(text.length).toBeGreaterThan(1_000_000);
    expect(refusal(text)).toContain('turns: a script holds at most 10000 turns, this one 340000');
  });

  // 22 000 calls fit in one turn of a 1 MiB ConfigMap, and the SDK's work on them grew faster than their count.
  it(`refuses a turn of more than ${MAX_TURN_TOOL_CALLS} tool calls, naming the bound and the count`, () => {
    const call = { toolName: 'read_file', input: { path: 'a' } };
    const turns = (calls: number) =>
      JSON.stringify({ turns: [{ text: 'looking' }, { toolCalls: Array.from({ length: calls }, () => call) }] });
    expect(parseModelScript(turns(MAX_TURN_TOOL_CALLS)).turns[1]?.toolCalls).toHaveLength(MAX_TURN_TOOL_CALLS);
    expect(refusal(turns(22_260))).toContain(`turns.1.toolCalls: a turn holds at most ${MAX_TURN_TOOL_CALLS} tool calls, this one 22260`);
  });

  it('refuses an empty script and non-object tool input', () => {
    expect(() => parseModelScript('{"turns": []}')).toThrowError(/at least one turn/);
    expect(() => parseModelScript('{"turns": [{"toolCalls": [{"toolName": "bash", "input": "ls"}]}]}')).toThrowError(
      /turns\.0\.toolCalls\.0\.input/,
    );
  });
});

describe('scripted language model', () => {
  it('plays the turns in order through generateText, with the script usage', async () => {
    const model = scriptedModel(API_EXAMPLE);
    let messages: ModelMessage[] = [{ role: 'user', content: 'go' }];

    const first = await generateText({ model, tools, messages });
    expect(first.toolCalls.map((call) => [call.toolName, call.input])).toEqual([['read_file', { path: 'src/app.ts' }]]);
    expect(usageOfModelCall(first.usage)).toMatchObject({ inputTokens: 1200, outputTokens: 40, totalTokens: 1240, complete: true });
    messages = continueWith(messages, first);

    const second = await generateText({ model, tools, messages });
    expect(second.toolCalls[0]?.toolName).toBe('edit_file');
    expect(usageOfModelCall(second.usage)).toMatchObject({ inputTokens: 1500, cacheReadTokens: 1000 });
    messages = continueWith(messages, second);

    const third = await generateText({ model, tools, messages });
    expect(third.toolCalls).toEqual([]);
    expect(third.text).toBe('Changed a to b.');
    expect(third.finishReason).toBe('stop');
  });

  it('replays the same turn with the same tool call ids when a step is redone', async () => {
    const model = scriptedModel(API_EXAMPLE);
    const messages: ModelMessage[] = [{ role: 'user', content: 'go' }];
    const once = await generateText({ model, tools, messages });
    const again = await generateText({ model, tools, messages });
    expect(again.toolCalls).toEqual(once.toolCalls);
    expect(once.toolCalls[0]?.toolCallId).toBe('scripted-t0-c0');
  });

  it('reports no usage for a turn without usage', async () => {
    const model = scriptedModel('{"turns": [{"text": "done"}]}');
    const result = await generateText({ model, messages: [{ role: 'user', content: 'go' }] });
    expect(result.usage.inputTokens).toBeUndefined();
    expect(usageOfModelCall(result.usage).complete).toBe(false);
  });

  it('ends with the last text when the script runs out', async () => {
    const model = scriptedModel('{"turns": [{"text": "looking"}, {"toolCalls": [{"toolName": "read_file", "input": {"path": "a"}}]}]}');
    const messages: ModelMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: 'looking' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'x', toolName: 'read_file', input: { path: 'a' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'x', toolName: 'read_file', output: { type: 'text', value: 'a' } }] },
    ];
    const result = await generateText({ model, tools, messages });
    expect(result.text).toBe('looking');
    expect(result.toolCalls).toEqual([]);
  });

  it('counts the assistant turns a compaction summary stands for', async () => {
    const model = scriptedModel('{"turns": [{"text": "one"}, {"text": "two"}, {"text": "three"}]}');
    const result = await generateText({
      model,
      messages: [{ role: 'user', content: 'summary', providerOptions: { chamvi: { summarisedAssistantTurns: 2 } } }],
    });
    expect(result.text).toBe('three');
  });

  it('streams the same turn through streamText', async () => {
    const model = scriptedModel(API_EXAMPLE);
    const result = streamText({ model, tools, messages: [{ role: 'user', content: 'go' }] });
    const toolCalls = await result.toolCalls;
    expect(toolCalls.map((call) => call.input)).toEqual([{ path: 'src/app.ts' }]);
    expect((await result.usage).inputTokens).toBe(1200);
  });
});
