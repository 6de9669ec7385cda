import type { LanguageModelUsage } from 'ai';
import { describe, expect, it } from 'vitest';
import { addUsage, emptyUsage, usageOfModelCall } from '../../operator/src/agent/usage-accounting.ts';

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
});
