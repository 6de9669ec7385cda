// providers/answer-bounds.ts and with-answer-bounds.ts: what of a model's answer the ai SDK is
// given. Tool calls past the bound are dropped before the SDK sees them, arguments nested past
// the depth bound are replaced by a note the model gets back as a tool error, and the caller
// hears of each answer (its usage, what was dropped) before the SDK works on it.
import type { JSONObject, LanguageModelV4, LanguageModelV4Content } from '@ai-sdk/provider';
import { generateText, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { boundAnswerContent, MAX_ANSWER_DEPTH, nestsDeeperThan, tooDeepNote } from '../../operator/src/providers/answer-bounds.ts';
import { ScriptedLanguageModel } from '../../operator/src/providers/scripted/scripted-language-model.ts';
import { withAnswerBounds, type ModelAnswer } from '../../operator/src/providers/with-answer-bounds.ts';
import { estimateTextTokens } from '../../operator/src/agent/estimate-tokens.ts';
import { usageOfModelAnswer } from '../../operator/src/agent/usage-accounting.ts';

const call = (index: number, input = '{"path":"a"}'): LanguageModelV4Content => ({
  type: 'tool-call',
  toolCallId: `c${index}`,
  toolName: 'read_file',
  input,
});
const deep = (depth: number) => `{"path":"a","x":${'['.repeat(depth)}${']'.repeat(depth)}}`;
const tools = { read_file: tool({ description: 'read', inputSchema: z.object({ path: z.string() }) }) };

describe('nestsDeeperThan', () => {
  const nested = (depth: number): JSONObject => {
    let value: JSONObject = {};
    for (let level = 1; level < depth; level += 1) value = { value };
    return value;
  };

  it('counts objects and arrays as jsonNestingDepth does, and stops at the first level past the bound', () => {
    expect(nestsDeeperThan({ a: [1, { b: 2 }] }, 3)).toBe(false);
    expect(nestsDeeperThan({ a: [1, { b: 2 }] }, 2)).toBe(true);
    expect(nestsDeeperThan('a string', 0)).toBe(false);
    expect(nestsDeeperThan(nested(64), 64)).toBe(false);
    expect(nestsDeeperThan(nested(1_000_000), 64)).toBe(true);
  });
});

describe('boundAnswerContent', () => {
  it('keeps the first maxToolCalls calls and every other part, in order, and counts the dropped ones', () => {
    const content: LanguageModelV4Content[] = [
      { type: 'text', text: 'working' },
      call(0),
      call(1),
      call(2),
      { type: 'text', text: 'and' },
      call(3),
    ];
    const bounded = boundAnswerContent(content, { maxToolCalls: 2, maxDepth: MAX_ANSWER_DEPTH });
    expect(bounded.content).toEqual([{ type: 'text', text: 'working' }, call(0), call(1), { type: 'text', text: 'and' }]);
    expect(bounded.droppedToolCalls).toBe(2);
    expect(bounded.tooDeepValues).toBe(0);
  });

  // The Responses API lets a provider tool's result and metadata carry any JSON: each was copied recursively.
  it("replaces a provider tool's result nested past the bound and drops metadata nested past it", () => {
    let deepValue: JSONObject = {};
    for (let level = 0; level < 5_000; level += 1) deepValue = { deepValue };
    const content: LanguageModelV4Content[] = [
      { type: 'tool-result', toolCallId: 'ws1', toolName: 'web_search', result: deepValue },
      { type: 'text', text: 'found it', providerMetadata: { fake: { deepValue } } },
      { type: 'text', text: 'kept', providerMetadata: { fake: { itemId: 'msg_1' } } },
    ];
    const bounded = boundAnswerContent(content, { maxToolCalls: 10, maxDepth: MAX_ANSWER_DEPTH });
    expect(bounded.content).toEqual([
      {
        type: 'tool-result',
        toolCallId: 'ws1',
        toolName: 'web_search',
        result: expect.stringContaining('nested more than 64 levels deep'),
      },
      { type: 'text', text: 'found it', providerMetadata: undefined },
      content[2],
    ]);
    expect(bounded.tooDeepValues).toBe(2);
  });

  it('replaces arguments nested past the bound by the note, as a JSON string, and leaves the others as they are', () => {
    const content = [call(0, deep(MAX_ANSWER_DEPTH - 1)), call(1, deep(MAX_ANSWER_DEPTH))];
    const bounded = boundAnswerContent(content, { maxToolCalls: 10, maxDepth: MAX_ANSWER_DEPTH });
    expect(bounded.content[0]).toBe(content[0]);
    expect(bounded.content[1]).toEqual({ ...content[1], input: JSON.stringify(tooDeepNote(MAX_ANSWER_DEPTH)) });
    expect(bounded.tooDeepValues).toBe(1);
  });
});

/** A model answering `content` with usage, through the bounds, telling `answers` of each answer. */
function boundedModel(content: LanguageModelV4Content[], answers: ModelAnswer[], maxToolCalls = 3, raw?: unknown): LanguageModelV4 {
  const model: LanguageModelV4 = {
    specificationVersion: 'v4',
    provider: 'fake',
    modelId: 'fake',
    supportedUrls: {},
    doGenerate: async () => ({
      content,
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      usage: {
        inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: undefined },
        outputTokens: { total: 5, text: 5, reasoning: 0 },
        ...(raw === undefined ? {} : { raw: raw as never }),
      },
      warnings: [],
    }),
    doStream: () => Promise.reject(new Error('not streamed')),
  };
  return withAnswerBounds(model, { maxToolCalls, onAnswer: (answer) => answers.push(answer) });
}

/** A model answering `content` with `usage: {}`: the SDK reads no figure at all. */
function unreportedModel(content: LanguageModelV4Content[], answers: ModelAnswer[], maxToolCalls: number): LanguageModelV4 {
  const model: LanguageModelV4 = {
    specificationVersion: 'v4',
    provider: 'fake',
    modelId: 'fake',
    supportedUrls: {},
    doGenerate: async () => ({
      content,
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      usage: {
        inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: undefined, text: undefined, reasoning: undefined },
      },
      warnings: [],
    }),
    doStream: () => Promise.reject(new Error('not streamed')),
  };
  return withAnswerBounds(model, { maxToolCalls, onAnswer: (answer) => answers.push(answer) });
}

describe('withAnswerBounds', () => {
  it("keeps none of the provider's raw usage object, which no one reads and may nest without bound", async () => {
    let nested: unknown[] = [];
    for (let depth = 0; depth < 200_000; depth++) nested = [nested];
    expect(() => JSON.stringify(nested)).toThrow(RangeError);
    const model = boundedModel([call(0)], [], 3, { nested });
    const result = await model.doGenerate({ prompt: [] });
    expect(result.usage).not.toHaveProperty('raw');
    expect(() => JSON.stringify(result)).not.toThrow();
  });

  it('gives generateText only the calls within the bound, and tells of the answer before it works on it', async () => {
    const answers: ModelAnswer[] = [];
    const model = boundedModel(
      Array.from({ length: 10 }, (_, index) => call(index)),
      answers,
    );
    const result = await generateText({ model, tools, prompt: 'go', maxRetries: 0 });
    expect(result.toolCalls.map((toolCall) => toolCall.toolCallId)).toEqual(['c0', 'c1', 'c2']);
    expect(answers).toEqual([
      expect.objectContaining({
        droppedToolCalls: 7,
        tooDeepValues: 0,
        usage: expect.objectContaining({ inputTokens: expect.objectContaining({ total: 10 }) }),
      }),
    ]);
    expect(answers[0]?.content).toHaveLength(3);
  });

  // The calls past the bound came back all the same: an endpoint that reports no usage is
  // counted from what came back (usage-accounting.ts), and with only the kept calls in sight an
  // answer of 5 000 calls counted as one of 65.
  it('tells the tokens of the calls it dropped, their tool names and arguments estimated as a kept call is', async () => {
    const answers: ModelAnswer[] = [];
    const model = boundedModel(
      Array.from({ length: 10 }, (_, index) => call(index, `{"path":"${'p'.repeat(index)}"}`)),
      answers,
    );
    await model.doGenerate({ prompt: [] });
    const expected = [3, 4, 5, 6, 7, 8, 9].reduce(
      (sum, index) => sum + estimateTextTokens('read_file') + estimateTextTokens(`{"path":"${'p'.repeat(index)}"}`),
      0,
    );
    expect(answers[0]).toMatchObject({ droppedToolCalls: 7, droppedToolCallTokens: expected });
  });

  // Counted at four characters a token, arguments of CJK text or dense digits (a token a
  // character, or one per three digits) counted a quarter of what the same call counted kept.
  it.each([
    ['CJK text', `{"path":"${'文件名'.repeat(40)}"}`],
    ['dense digits', `{"path":"${'1.2.3.4,'.repeat(30)}"}`],
  ])('counts an answer over usage: {} the same whether its calls of %s were kept or dropped', async (_, input) => {
    const counted = async (maxToolCalls: number) => {
      const answers: ModelAnswer[] = [];
      await unreportedModel(
        Array.from({ length: 20 }, (_, index) => call(index, input)),
        answers,
        maxToolCalls,
      ).doGenerate({ prompt: [] });
      return usageOfModelAnswer(answers[0]!, 100).outputTokens;
    };
    const allKept = await counted(20);
    expect(allKept).toBe(20 * (estimateTextTokens('read_file') + estimateTextTokens(input)));
    expect(await counted(2)).toBe(allKept);
  });

  it('an endpoint answering usage: {} with 5 000 small calls: the estimate of its output counts all of them, not the 65 kept', async () => {
    const answers: ModelAnswer[] = [];
    const model = unreportedModel(
      Array.from({ length: 5_000 }, (_, index) => call(index)),
      answers,
      65,
    );
    await model.doGenerate({ prompt: [] });
    const counted = usageOfModelAnswer(answers[0]!, 100);
    expect(counted.outputTokens).toBe(5_000 * (estimateTextTokens('read_file') + estimateTextTokens('{"path":"a"}')));
    expect(counted.complete).toBe(false);
  });

  // Without the bound the SDK's recursive copy of the parsed arguments overflowed the stack,
  // and the step was retried ten times, asking the model each time.
  it('turns arguments nested 5 000 deep into an invalid call whose tool error names the bound', async () => {
    const answers: ModelAnswer[] = [];
    const model = boundedModel([call(0, deep(5_000)), call(1)], answers);
    const result = await generateText({ model, tools, prompt: 'go', maxRetries: 0 });
    const [tooDeep, fine] = result.toolCalls;
    expect(tooDeep).toMatchObject({ toolCallId: 'c0', invalid: true });
    expect(fine).toMatchObject({ toolCallId: 'c1', input: { path: 'a' } });
    expect(fine).not.toHaveProperty('invalid', true);
    const toolMessage = result.response.messages.find((message) => message.role === 'tool');
    expect(JSON.stringify(toolMessage?.content)).toContain(`nested more than ${MAX_ANSWER_DEPTH} levels deep`);
    expect(answers[0]?.tooDeepValues).toBe(1);
  });

  // Provider metadata nested 5 000 deep overflowed the SDK's copy of the answer, or, once the
  // copy ran optimised, the run state's JSON.stringify at the step's save: ten retries either way.
  it('drops provider metadata nested past the bound, on a part and on the answer, before generateText copies it', async () => {
    let deepValue: JSONObject = {};
    for (let level = 0; level < 5_000; level += 1) deepValue = { deepValue };
    const answers: ModelAnswer[] = [];
    const base = boundedModel([{ type: 'text', text: 'done', providerMetadata: { fake: { deepValue } } }], answers);
    const model: LanguageModelV4 = {
      ...base,
      doGenerate: (options) => base.doGenerate(options),
    };
    const result = await generateText({ model, prompt: 'go', maxRetries: 0 });
    expect(result.text).toBe('done');
    expect(() => JSON.stringify(result.response.messages)).not.toThrow();
    expect(answers[0]?.tooDeepValues).toBe(1);
  });

  it('bounds a stream the same way: the calls past the bound and their input parts never reach streamText', async () => {
    const script = {
      turns: [
        {
          text: 'reading',
          toolCalls: Array.from({ length: 6 }, (_, index) => ({ toolName: 'read_file', input: { path: `f${index}` } })),
          usage: { inputTokens: 7, outputTokens: 2 },
        },
      ],
    };
    const answers: ModelAnswer[] = [];
    const model = withAnswerBounds(new ScriptedLanguageModel(script), { maxToolCalls: 2, onAnswer: (answer) => answers.push(answer) });
    const result = streamText({ model, tools, prompt: 'go', maxRetries: 0 });
    const inputStarts: string[] = [];
    for await (const part of result.fullStream) if (part.type === 'tool-input-start') inputStarts.push(part.id);
    expect((await result.toolCalls).map((toolCall) => toolCall.input)).toEqual([{ path: 'f0' }, { path: 'f1' }]);
    expect(inputStarts).toEqual(['scripted-t0-c0', 'scripted-t0-c1']);
    expect(answers).toHaveLength(1);
    // Each dropped call: 'read_file' and '{"path":"fN"}', estimated as a kept call is.
    const perCall = estimateTextTokens('read_file') + estimateTextTokens('{"path":"f2"}');
    expect(answers[0]).toMatchObject({ droppedToolCalls: 4, droppedToolCallTokens: 4 * perCall, tooDeepValues: 0 });
    expect(answers[0]?.content).toEqual([
      { type: 'text', text: 'reading' },
      expect.objectContaining({ type: 'tool-call' }),
      expect.objectContaining({ type: 'tool-call' }),
    ]);
  });

  it('estimates the CJK arguments of the calls a stream drops as a kept call is, not at four characters a token', async () => {
    const path = '文件名'.repeat(40);
    const script = {
      turns: [
        {
          toolCalls: Array.from({ length: 6 }, () => ({ toolName: 'read_file', input: { path } })),
          usage: { inputTokens: 7, outputTokens: 2 },
        },
      ],
    };
    const answers: ModelAnswer[] = [];
    const model = withAnswerBounds(new ScriptedLanguageModel(script), { maxToolCalls: 2, onAnswer: (answer) => answers.push(answer) });
    await streamText({ model, tools, prompt: 'go', maxRetries: 0 }).consumeStream();
    const perCall = estimateTextTokens('read_file') + estimateTextTokens(JSON.stringify({ path }));
    expect(answers[0]).toMatchObject({ droppedToolCalls: 4, droppedToolCallTokens: 4 * perCall });
  });
});
