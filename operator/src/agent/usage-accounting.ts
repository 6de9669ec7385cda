// Token usage as the provider reported it, per call, per step and per run (chivgent's rules):
// tokens only, never money; a call that reported nothing makes the total `complete: false`
// instead of counting as zero, so a missing figure stays visibly missing. Compaction's own
// summarising call is added like any other call.

import type { LanguageModelUsage } from 'ai';

/** The shape of status.usage. */
export interface TokenUsage {
  /** Prompt tokens, cached ones included. */
  readonly inputTokens: number;
  /** Completion tokens, reasoning ones included. */
  readonly outputTokens: number;
  /** Part of inputTokens served from the provider's prompt cache. */
  readonly cacheReadTokens: number;
  /** Part of outputTokens spent on hidden reasoning. */
  readonly reasoningTokens: number;
  readonly totalTokens: number;
  /** False when at least one call in this sum reported no usage. */
  readonly complete: boolean;
}

/** The sum of no calls: zero, and complete because nothing is missing from it. */
export function emptyUsage(): TokenUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 0, complete: true };
}

/**
 * One model call's usage from the ai SDK's figure (`result.usage` of one generateText step,
 * or `totalUsage` of a one-step call). A call counts as reported when the provider gave both
 * input and output tokens; otherwise it adds nothing and marks the sum incomplete. Missing
 * cache or reasoning details mean the provider has none to report, so they count as 0.
 */
export function usageOfModelCall(usage: LanguageModelUsage | undefined): TokenUsage {
  const input = usage?.inputTokens;
  const output = usage?.outputTokens;
  if (!isCount(input) || !isCount(output)) {
    return { ...emptyUsage(), complete: false };
  }
  const cacheRead = usage?.inputTokenDetails?.cacheReadTokens;
  const reasoning = usage?.outputTokenDetails?.reasoningTokens;
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: isCount(cacheRead) ? cacheRead : 0,
    reasoningTokens: isCount(reasoning) ? reasoning : 0,
    // The SDK's total is input + output; a provider's own total_tokens is not used so the
    // three figures always agree.
    totalTokens: input + output,
    complete: true,
  };
}

/** Sums usages: a step's calls, or a run's steps. */
export function addUsage(...usages: readonly TokenUsage[]): TokenUsage {
  let sum = emptyUsage();
  for (const usage of usages) {
    sum = {
      inputTokens: sum.inputTokens + usage.inputTokens,
      outputTokens: sum.outputTokens + usage.outputTokens,
      cacheReadTokens: sum.cacheReadTokens + usage.cacheReadTokens,
      reasoningTokens: sum.reasoningTokens + usage.reasoningTokens,
      totalTokens: sum.totalTokens + usage.totalTokens,
      complete: sum.complete && usage.complete,
    };
  }
  return sum;
}

function isCount(value: number | undefined): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
