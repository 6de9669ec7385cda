// A tool call the provider cut off at the model's output limit: the model is told its answer
// hit the limit (not only that the JSON did not parse), and a run the model keeps cutting off
// fails naming the output limit. The model is a mock answering as a Chat Completions endpoint
// does when max_tokens ends the answer inside a call's arguments.
import { generateText, type ModelMessage } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { CUT_OFF_TOOL_CALL_RESULT, cutOffToolCallId, explainCutOffToolCall } from '../../operator/src/agent/cut-off-tool-call.ts';
import { answerCutOff, decideStop, UNUSABLE_TOOL_CALL_STEPS_LIMIT } from '../../operator/src/agent/stop-conditions.ts';
import { buildToolSet } from '../../operator/src/agent/tool-definitions.ts';
import { toolboxToolDefinitions } from '../../operator/src/agent/toolbox-tool-definitions.ts';
import { emptyUsage } from '../../operator/src/agent/usage-accounting.ts';

const tools = buildToolSet(['write_file', 'read_file'], toolboxToolDefinitions());
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 4096, text: 4096, reasoning: 0 },
};
const CUT_WRITE = '{"path":"src/big.ts","content":"export const table = [\\n  1, 2, 3,';

type Call = { id: string; tool: string; input: string };

/** One step of the worker's: the model's answer through generateText, then the cut-off call explained. */
async function step(calls: Call[], finishReason: 'length' | 'tool-calls') {
  const model = new MockLanguageModelV4({
    doGenerate: async () => ({
      content: calls.map((call) => ({ type: 'tool-call' as const, toolCallId: call.id, toolName: call.tool, input: call.input })),
      finishReason: { unified: finishReason, raw: finishReason },
      usage,
      warnings: [],
    }),
  });
  const result = await generateText({ model, messages: [{ role: 'user', content: 'write src/big.ts' }], tools, maxRetries: 0 });
  const cut = cutOffToolCallId(result.finishReason, result.toolCalls);
  return { result, cut, messages: explainCutOffToolCall(result.response.messages as ModelMessage[], cut) };
}

/** The tool error the model reads for each call the SDK answered itself, by call id. */
function toolErrors(messages: readonly ModelMessage[]): Record<string, string> {
  const errors: Record<string, string> = {};
  for (const message of messages) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result' && part.output.type === 'error-text') errors[part.toolCallId] = part.output.value;
    }
  }
  return errors;
}

describe('a tool call cut off at the output limit', () => {
  it('tells the model its answer hit the output limit and to write in smaller pieces, not the truncated JSON', async () => {
    const { messages } = await step([{ id: 'c1', tool: 'write_file', input: CUT_WRITE }], 'length');
    const told = toolErrors(messages)['c1'];
    expect(told).toBe(CUT_OFF_TOOL_CALL_RESULT);
    expect(told).toMatch(/output limit/);
    expect(told).toMatch(/in parts/);
    expect(told).not.toContain('export const table');
  });

  it('explains only the last call: the ones before it in the answer were whole, their results stay', async () => {
    const { messages, result } = await step(
      [
        { id: 'c0', tool: 'read_file', input: '{"path":"a.ts"}' },
        { id: 'c1', tool: 'read_file', input: '{"path":' },
        { id: 'c2', tool: 'write_file', input: CUT_WRITE },
      ],
      'length',
    );
    const errors = toolErrors(messages);
    expect(Object.keys(errors).sort()).toEqual(['c1', 'c2']);
    expect(errors['c2']).toBe(CUT_OFF_TOOL_CALL_RESULT);
    expect(errors['c1']).toMatch(/JSON parsing failed/);
    // The valid call is still the worker's to run; the assistant message is untouched.
    expect(result.toolCalls.filter((call) => !call.invalid).map((call) => call.toolCallId)).toEqual(['c0']);
    expect(messages[0]).toEqual(result.response.messages[0]);
  });

  it('leaves the SDK error alone when the answer was not cut, or its last call is a tool not offered', async () => {
    const finished = await step([{ id: 'c1', tool: 'write_file', input: CUT_WRITE }], 'tool-calls');
    expect(finished.cut).toBeUndefined();
    expect(toolErrors(finished.messages)['c1']).toMatch(/JSON parsing failed/);
    const unknownTool = await step([{ id: 'c1', tool: 'deploy', input: '{}' }], 'length');
    expect(unknownTool.cut).toBeUndefined();
    expect(toolErrors(unknownTool.messages)['c1']).not.toBe(CUT_OFF_TOOL_CALL_RESULT);
  });

  // Calls past the answer's bound never reached the SDK (with-answer-bounds.ts): the cut one was among them.
  it('explains none when the answer held calls the SDK never saw', async () => {
    const { result } = await step([{ id: 'c1', tool: 'write_file', input: CUT_WRITE }], 'length');
    expect(cutOffToolCallId(result.finishReason, result.toolCalls, 1)).toBeUndefined();
  });

  it('ends a run the model keeps cutting off naming the output limit, not tool-calling support', async () => {
    const { result } = await step([{ id: 'c1', tool: 'write_file', input: CUT_WRITE }], 'length');
    const decision = decideStop({
      steps: UNUSABLE_TOOL_CALL_STEPS_LIMIT,
      lastStepHadToolCalls: true,
      lastAnswerCutOff: answerCutOff(result.finishReason, result.toolCalls.length > 0),
      usage: emptyUsage(),
      budget: { maxSteps: 50 },
      startedAt: 0,
      timeoutMs: 3_600_000,
      now: 1,
      unusableToolCallSteps: UNUSABLE_TOOL_CALL_STEPS_LIMIT,
      lastUnusableToolCall: 'write_file: Invalid input for tool write_file: JSON parsing failed',
    });
    expect(decision).toMatchObject({ stop: true, outcome: 'failed', reason: 'ModelResponseInvalid' });
    const message = decision.stop && decision.outcome === 'failed' ? decision.message : '';
    expect(message).toMatch(/cut off at its output limit/);
    expect(message).not.toMatch(/supports tool calling/);
  });
});
