import type { LanguageModelV4Usage } from '@ai-sdk/provider';
import type { LanguageModelUsage } from 'ai';
import { describe, expect, it } from 'vitest';
import {
  addUsage,
  emptyUsage,
  MAX_CALL_TOKENS,
  usageOfModelAnswer,
  usageOfModelCall,
  type TokenUsage,
} from '../../operator/src/agent/usage-accounting.ts';
import { estimateTextTokens } from '../../operator/src/agent/estimate-tokens.ts';
import { runStateSchema } from '../../operator/src/workers/run-state-schema.ts';

function reported(input: number, output: number, details: { cacheRead?: number; reasoning?: number } = {}): LanguageModelUsage {
  return {
    inputTokens: input,
    inputTokenDetails: { noCacheTokens: undefined, cacheReadTokens: details.cacheRead, cacheWriteTokens: undefined },
    outputTokens: output,
    outputTokenDetails: { textTokens: undefined, reasoningTokens: details.reasoning },
    totalTokens: input + output,
  };
}

const nothing: LanguageModelUsage = {
  inputTokens: undefined,
  inputTokenDetails: { noCacheTokens: undefined, cacheReadTokens: undefined, cacheWriteTokens: undefined },
  outputTokens: undefined,
  outputTokenDetails: { textTokens: undefined, reasoningTokens: undefined },
  totalTokens: undefined,
};

describe('usage accounting', () => {
  it('keeps cache-read and reasoning tokens of a call', () => {
    expect(usageOfModelCall(reported(1500, 60, { cacheRead: 1000, reasoning: 20 }))).toEqual({
      inputTokens: 1500,
      outputTokens: 60,
      cacheReadTokens: 1000,
      reasoningTokens: 20,
      totalTokens: 1560,
      complete: true,
    });
  });

  it('counts missing cache and reasoning details as none, not as an unreported call', () => {
    expect(usageOfModelCall(reported(10, 5))).toMatchObject({ cacheReadTokens: 0, reasoningTokens: 0, complete: true });
  });

  it('marks a call that reported nothing incomplete instead of counting zero', () => {
    expect(usageOfModelCall(nothing)).toEqual({ ...emptyUsage(), complete: false });
    expect(usageOfModelCall(undefined).complete).toBe(false);
    // Half a report is not a report.
    expect(usageOfModelCall({ ...nothing, inputTokens: 100 }).complete).toBe(false);
  });

  it('sums steps into a run total that stays incomplete once any call reported nothing', () => {
    const step1 = usageOfModelCall(reported(1200, 40));
    const step2 = addUsage(usageOfModelCall(reported(1500, 60, { cacheRead: 1000 })), usageOfModelCall(nothing));
    const step3 = usageOfModelCall(reported(1700, 12));
    const run = addUsage(step1, step2, step3);
    expect(run).toEqual({
      inputTokens: 4400,
      outputTokens: 112,
      cacheReadTokens: 1000,
      reasoningTokens: 0,
      totalTokens: 4512,
      complete: false,
    });
  });

  it('includes a compaction call in the step it happened in', () => {
    const summarising = usageOfModelCall(reported(8000, 400));
    const stepCall = usageOfModelCall(reported(3000, 50));
    expect(addUsage(summarising, stepCall).totalTokens).toBe(11_450);
  });

  it('is complete and zero for no calls', () => {
    expect(addUsage()).toEqual(emptyUsage());
    expect(emptyUsage().complete).toBe(true);
  });

  it("counts the worker's estimate for a call that reported nothing, marked incomplete", () => {
    expect(usageOfModelCall(nothing, { inputTokens: 1200, outputTokens: 40.5 })).toEqual({
      inputTokens: 1200,
      outputTokens: 41,
      cacheReadTokens: 0,
      reasoningTokens: 0,
      totalTokens: 1241,
      complete: false,
    });
  });

  it('keeps the half of a report that came and estimates the other', () => {
    expect(usageOfModelCall({ ...nothing, inputTokens: 100 }, { inputTokens: 90, outputTokens: 7 })).toMatchObject({
      inputTokens: 100,
      outputTokens: 7,
      totalTokens: 107,
      complete: false,
    });
  });

  // The run's state and the CRD take whole counts only: a fraction or 2^60 made the next
  // step's load fail its schema (StateLost), as if Redis had been tampered with.
  it.each([
    ['a fraction', 0.5],
    ['2^60', 2 ** 60],
    ['past MAX_CALL_TOKENS', MAX_CALL_TOKENS + 1],
    ['Infinity (1e308 + 1e308)', 1e308 + 1e308],
    ['NaN', Number.NaN],
    ['negative', -5],
  ])('takes %s as no report: the estimate counts and the run state takes the sum', (_, figure) => {
    const call = usageOfModelCall(reported(figure, figure, { cacheRead: figure, reasoning: figure }), { inputTokens: 10, outputTokens: 3 });
    expect(call).toEqual({ inputTokens: 10, outputTokens: 3, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 13, complete: false });
    const run = addUsage(call, call, usageOfModelCall(reported(MAX_CALL_TOKENS, MAX_CALL_TOKENS)));
    expect(runStateSchema.shape.usage.safeParse(JSON.parse(JSON.stringify(run))).success).toBe(true);
  });

  it('keeps cache-read and reasoning tokens within the figures they are part of', () => {
    expect(usageOfModelCall(reported(10, 4, { cacheRead: 25, reasoning: 9 }))).toMatchObject({ cacheReadTokens: 10, reasoningTokens: 4 });
  });

  it("reads a LanguageModelV4 answer's usage, estimating from its content only when the provider reported none", () => {
    const usage = (input: number | undefined, output: number | undefined): LanguageModelV4Usage => ({
      inputTokens: { total: input, noCache: undefined, cacheRead: input === undefined ? undefined : 2, cacheWrite: undefined },
      outputTokens: { total: output, text: undefined, reasoning: undefined },
    });
    const content = [
      { type: 'text' as const, text: 'x'.repeat(40) },
      { type: 'tool-call' as const, toolCallId: 'c1', toolName: 'read_file', input: '{"path":"README.md"}' },
    ];
    expect(usageOfModelAnswer({ usage: usage(300, 5), content }, 999)).toEqual<TokenUsage>({
      inputTokens: 300,
      outputTokens: 5,
      cacheReadTokens: 2,
      reasoningTokens: 0,
      totalTokens: 305,
      complete: true,
    });
    // 40 characters of text and 9 of tool name at four characters a token (10 + 3); the arguments
    // as the tokenizer splits them, '{"|path|":"|README|.md|"}' (6, as o200k counts them).
    expect(usageOfModelAnswer({ usage: usage(undefined, undefined), content }, 999)).toMatchObject({
      inputTokens: 999,
      outputTokens: 19,
      totalTokens: 1018,
      complete: false,
    });
  });

  // The calls past the answer's bound (with-answer-bounds.ts) are not in `content`, but they
  // came back: an answer of 5 000 small calls over `usage: {}` counted as its 65 kept ones.
  it('adds the estimated tokens of the calls dropped from an answer to the estimate of its output', () => {
    const usage: LanguageModelV4Usage = {
      inputTokens: { total: 0, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 0, text: undefined, reasoning: undefined },
    };
    const content = [{ type: 'text' as const, text: 'x'.repeat(40) }];
    expect(usageOfModelAnswer({ usage, content, droppedToolCallTokens: 105_001 }, 999)).toMatchObject({
      outputTokens: 10 + 105_001,
      complete: false,
    });
    // A provider's believable report stands: the estimate only replaces a figure far below it.
    const honest: LanguageModelV4Usage = {
      ...usage,
      inputTokens: { ...usage.inputTokens, total: 999 },
      outputTokens: { ...usage.outputTokens, total: 90_000 },
    };
    expect(usageOfModelAnswer({ usage: honest, content, droppedToolCallTokens: 105_001 }, 999)).toMatchObject({
      outputTokens: 90_000,
      complete: true,
    });
  });

  // A dropped call of CJK arguments is a token a character, as a kept one is estimated: at four
  // characters a token it counted a quarter of that.
  it('counts an answer of CJK calls the same whether its calls were kept or dropped', () => {
    const usage: LanguageModelV4Usage = {
      inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    };
    const input = `{"path":"${'文件名'.repeat(40)}"}`;
    const kept = [{ type: 'tool-call' as const, toolCallId: 'c', toolName: 'read_file', input }];
    const callTokens = estimateTextTokens('read_file') + estimateTextTokens(input);
    expect(usageOfModelAnswer({ usage, content: kept }, 999).outputTokens).toBe(callTokens);
    expect(usageOfModelAnswer({ usage, content: [], droppedToolCallTokens: callTokens }, 999).outputTokens).toBe(callTokens);
  });

  it('adds nothing for a dropped-call figure that is no count', () => {
    const usage: LanguageModelV4Usage = {
      inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    };
    for (const droppedToolCallTokens of [-5, Number.NaN, 1.5, Number.POSITIVE_INFINITY]) {
      expect(usageOfModelAnswer({ usage, content: [], droppedToolCallTokens }, 999).outputTokens).toBe(0);
    }
  });
});
