// Token usage as the provider reported it, per call, per step and per run (chivgent's rules):
// tokens only, never money. A call that reported nothing (or a figure that cannot be a token
// count, or one far below what was plainly sent or received) is not counted as zero, which
// would let it spend without end under every budget (spec.budget.maxTokens, the namespace's
// tokens per day): its missing figures are the worker's own estimate of what it sent and what
// came back (estimate-tokens.ts), and the sum is marked `complete: false` so the estimate
// stays visible as one. Compaction's own summarising call is added like any other call.

import type { LanguageModelV4Content, LanguageModelV4Usage } from '@ai-sdk/provider';
import { estimateTextTokens } from './estimate-tokens.ts';

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
  /** False when at least one call in this sum reported no usage, or not all of it: its missing figures are estimated. */
  readonly complete: boolean;
}

/** Usage as the ai SDK reports a call (its LanguageModelUsage fits); each figure may be missing. */
export interface ReportedUsage {
  readonly inputTokens?: number | undefined;
  readonly outputTokens?: number | undefined;
  readonly inputTokenDetails?: { readonly cacheReadTokens?: number | undefined } | undefined;
  readonly outputTokenDetails?: { readonly reasoningTokens?: number | undefined } | undefined;
}

/** The worker's estimate of a call: what it sent and what came back, in tokens (estimate-tokens.ts). */
export interface EstimatedUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/**
 * The most tokens one figure of one call may report: 10^8. A call's input and its output each
 * fit in the model's context window, and the largest window sold today is 10^7 tokens. A
 * figure past it, a fraction or one that is not a safe integer (2^60, 1e308 + 1e308 is
 * Infinity) is no count at all: kept, it made the run's state fail its own schema at the next
 * load (StateLost, as if Redis had been tampered with), and the CRD refuses it too. Under the
 * bound a run's sum stays exact: 1 000 steps (maxSteps' most), each with a compaction call,
 * at most 2 * 10^8 a call, is 4 * 10^11, far below 2^53.
 */
export const MAX_CALL_TOKENS = 100_000_000;

/**
 * A reported figure below this share of the worker's estimate of the same thing is not
 * believed: a tenth. Honest counts come near the estimate (estimate-tokens.ts) or above it:
 * its errors against real tokenizers are a small factor either way, hidden reasoning adds
 * output, and a prompt-cache hit lowers no figure here, as the ai SDK's inputTokens includes
 * cache reads (inputTokenDetails.cacheReadTokens is the part of it they are). What takes an
 * honest count furthest below the estimate is an image, estimated at IMAGE_TOKENS though a
 * small one may cost a provider a few dozen: the four a request shows at most, beside the
 * smallest system prompt and one tool's schema, still come to more than a tenth. A figure
 * under it is an endpoint that did not count (a proxy answering `usage: {}`, which the SDK
 * reads as 0 and 0): believed, an answer of 100 KB to a request of 200 000 tokens counted 0,
 * complete, past every budget. Under the share a lying endpoint can at most make a call look
 * ten times cheaper than it was.
 */
export const LEAST_BELIEVED_SHARE_OF_ESTIMATE = 0.1;

/** The sum of no calls: zero, and complete because nothing is missing from it. */
export function emptyUsage(): TokenUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 0, complete: true };
}

/**
 * One model call's usage from the ai SDK's figure (`result.usage` of one generateText step,
 * or `totalUsage` of a one-step call). A figure counts as reported when it is a token count
 * (isCount) and, given the worker's estimate, at least LEAST_BELIEVED_SHARE_OF_ESTIMATE of it;
 * a call with both input and output reported is complete. A figure not reported is the
 * estimate's (none given: 0) and marks the call incomplete. Missing cache or reasoning details
 * mean the provider has none to report, so they count as 0; each is a part of its whole, so
 * never more than it.
 */
export function usageOfModelCall(usage: ReportedUsage | undefined, estimate?: EstimatedUsage): TokenUsage {
  const input = usage?.inputTokens;
  const output = usage?.outputTokens;
  const inputReported = isCount(input) && believable(input, estimate?.inputTokens);
  const outputReported = isCount(output) && believable(output, estimate?.outputTokens);
  const inputTokens = inputReported ? input : estimatedCount(estimate?.inputTokens);
  const outputTokens = outputReported ? output : estimatedCount(estimate?.outputTokens);
  const cacheRead = usage?.inputTokenDetails?.cacheReadTokens;
  const reasoning = usage?.outputTokenDetails?.reasoningTokens;
  return {
    inputTokens,
    outputTokens,
    cacheReadTokens: inputReported && isCount(cacheRead) ? Math.min(cacheRead, inputTokens) : 0,
    reasoningTokens: outputReported && isCount(reasoning) ? Math.min(reasoning, outputTokens) : 0,
    // The SDK's total is input + output; a provider's own total_tokens is not used so the
    // three figures always agree.
    totalTokens: inputTokens + outputTokens,
    complete: inputReported && outputReported,
  };
}

/**
 * One model call's usage from the answer a LanguageModelV4 gave (providers/with-answer-bounds.ts
 * reports it before the SDK works on it). `sentTokens`: the estimate of what was sent; what came
 * back is estimated from the answer's content and the calls dropped from it. Each stands in for
 * a figure the provider did not report, or reported too far below it to be a count
 * (usageOfModelCall). `declared`: the figures are a script's (the scripted model, which sends
 * nothing anywhere and reports what its run's author wrote, to exercise the accounting): taken
 * as they are.
 */
export function usageOfModelAnswer(
  answer: {
    readonly usage: LanguageModelV4Usage | undefined;
    readonly content: readonly LanguageModelV4Content[];
    /** Estimated tokens of the tool calls dropped from `content` (with-answer-bounds.ts): they came back too. */
    readonly droppedToolCallTokens?: number;
  },
  sentTokens: number,
  options: { readonly declared?: boolean } = {},
): TokenUsage {
  const { usage } = answer;
  const reported = usage && {
    inputTokens: usage.inputTokens.total,
    outputTokens: usage.outputTokens.total,
    inputTokenDetails: { cacheReadTokens: usage.inputTokens.cacheRead },
    outputTokenDetails: { reasoningTokens: usage.outputTokens.reasoning },
  };
  const estimate = () => ({
    inputTokens: sentTokens,
    outputTokens: estimateAnswerTokens(answer.content) + droppedTokens(answer.droppedToolCallTokens),
  });
  if (!options.declared) return usageOfModelCall(reported, estimate());
  // A script's figures are checked only for being counts: the estimate stands in for a missing one.
  const complete = isCount(reported?.inputTokens) && isCount(reported?.outputTokens);
  return usageOfModelCall(reported, complete ? undefined : estimate());
}

/** Text, reasoning and tool calls of an answer, as estimate-tokens.ts counts text. */
function estimateAnswerTokens(content: readonly LanguageModelV4Content[]): number {
  let tokens = 0;
  for (const part of content) {
    if (part.type === 'text' || part.type === 'reasoning') tokens += estimateTextTokens(part.text);
    else if (part.type === 'tool-call') tokens += estimateTextTokens(part.toolName) + estimateTextTokens(part.input);
  }
  return tokens;
}

/**
 * The calls dropped from an answer, estimated by with-answer-bounds.ts as estimateAnswerTokens
 * estimates a kept call (estimate-tokens.ts), so an answer counts the same whichever of its calls
 * were kept. Only a count adds: the figure is the worker's own, but the sum must stay one.
 */
function droppedTokens(tokens: number | undefined): number {
  return tokens !== undefined && Number.isSafeInteger(tokens) && tokens > 0 ? tokens : 0;
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

/** Whether a reported count is at least the believed share of the estimate of the same figure (none given: any count is). */
function believable(reported: number, estimate: number | undefined): boolean {
  if (estimate === undefined || !(estimate > 0)) return true;
  return reported >= Math.floor(Math.min(estimate, MAX_CALL_TOKENS) * LEAST_BELIEVED_SHARE_OF_ESTIMATE);
}

function isCount(value: number | undefined): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= MAX_CALL_TOKENS;
}

/** An estimate as a count: whole tokens, rounded up, within the same bound as a reported figure. */
function estimatedCount(value: number | undefined): number {
  if (value === undefined || !(value > 0)) return 0;
  return Math.min(Math.ceil(value), MAX_CALL_TOKENS);
}
