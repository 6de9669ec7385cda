// A reported figure far below what was plainly sent or received is no count. An endpoint
// answering `usage: {}` (which the ai SDK reads as 0 and 0) had an answer of 100 KB to a
// request of 200 000 tokens count 0, complete, past spec.budget.maxTokens and the namespace's
// tokens per day; the same call reporting nothing counted the estimate.
import type { LanguageModelV4Usage } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { estimateTextTokens } from '../../operator/src/agent/estimate-tokens.ts';
import {
  LEAST_BELIEVED_SHARE_OF_ESTIMATE,
  usageOfModelAnswer,
  usageOfModelCall,
  type TokenUsage,
} from '../../operator/src/agent/usage-accounting.ts';

const v4 = (input: number | undefined, output: number | undefined, cacheRead?: number): LanguageModelV4Usage => ({
  inputTokens: { total: input, noCache: undefined, cacheRead, cacheWrite: undefined },
  outputTokens: { total: output, text: undefined, reasoning: undefined },
});

const SENT = 200_000;
const bigText = 'x '.repeat(50_000);
const bigAnswer = [{ type: 'text' as const, text: bigText }];
/** The worker's estimate of the answer, as estimate-tokens.ts makes it. */
const ANSWER = estimateTextTokens(bigText);
/** The least figure believed for each. */
const LEAST_INPUT = Math.floor(SENT * LEAST_BELIEVED_SHARE_OF_ESTIMATE);
const LEAST_OUTPUT = Math.floor(ANSWER * LEAST_BELIEVED_SHARE_OF_ESTIMATE);

describe('a reported figure too small to be a count', () => {
  it('counts the estimate, marked incomplete, for a call reporting 0 and 0, as for one reporting nothing', () => {
    const estimated: TokenUsage = {
      inputTokens: SENT,
      outputTokens: ANSWER,
      cacheReadTokens: 0,
      reasoningTokens: 0,
      totalTokens: SENT + ANSWER,
      complete: false,
    };
    expect(ANSWER).toBeGreaterThanOrEqual(25_000);
    expect(usageOfModelAnswer({ usage: v4(0, 0), content: bigAnswer }, SENT)).toEqual(estimated);
    expect(usageOfModelAnswer({ usage: v4(undefined, undefined), content: bigAnswer }, SENT)).toEqual(estimated);
  });

  it.each([
    ['input one under the share of the request', () => v4(LEAST_INPUT - 1, ANSWER), { inputTokens: SENT, outputTokens: ANSWER }],
    ['output one under the share of the answer', () => v4(SENT, LEAST_OUTPUT - 1), { inputTokens: SENT, outputTokens: ANSWER }],
    ['an input of 1 token', () => v4(1, ANSWER), { inputTokens: SENT, outputTokens: ANSWER }],
  ])('does not believe %s: that figure is the estimate', (_, usage, counted) => {
    expect(usageOfModelAnswer({ usage: usage(), content: bigAnswer }, SENT)).toMatchObject({ ...counted, complete: false });
  });

  it.each([
    ['the share of the estimate exactly', () => v4(LEAST_INPUT, LEAST_OUTPUT)],
    ['half the estimate', () => v4(SENT / 2, Math.ceil(ANSWER / 2))],
    ['above it (other scripts, hidden reasoning)', () => v4(SENT * 2, ANSWER * 3)],
  ])('believes a count of %s', (_, usage) => {
    const given = usage();
    expect(usageOfModelAnswer({ usage: given, content: bigAnswer }, SENT)).toMatchObject({
      inputTokens: given.inputTokens.total,
      outputTokens: given.outputTokens.total,
      complete: true,
    });
  });

  it("believes a prompt-cache hit: the ai SDK's inputTokens includes the cache reads", () => {
    expect(usageOfModelAnswer({ usage: v4(195_000, ANSWER, 190_000), content: bigAnswer }, SENT)).toEqual<TokenUsage>({
      inputTokens: 195_000,
      outputTokens: ANSWER,
      cacheReadTokens: 190_000,
      reasoningTokens: 0,
      totalTokens: 195_000 + ANSWER,
      complete: true,
    });
  });

  it('believes a 0 for an answer too short for a tenth of it to be a token', () => {
    const short = [{ type: 'text' as const, text: 'ok' }];
    expect(usageOfModelAnswer({ usage: v4(3_000, 0), content: short }, 3_000)).toMatchObject({ outputTokens: 0, complete: true });
  });

  it('takes the figures a script declares as they are: the scripted model sends nothing anywhere', () => {
    expect(usageOfModelAnswer({ usage: v4(10, 1), content: bigAnswer }, SENT, { declared: true })).toMatchObject({
      inputTokens: 10,
      outputTokens: 1,
      complete: true,
    });
    // A figure the script leaves out is still the estimate's.
    expect(usageOfModelAnswer({ usage: v4(undefined, 1), content: bigAnswer }, SENT, { declared: true })).toMatchObject({
      inputTokens: SENT,
      complete: false,
    });
  });

  it('judges the figures against the estimate usageOfModelCall is given, and takes them as they are without one', () => {
    const reported = { inputTokens: 0, outputTokens: 0 };
    expect(usageOfModelCall(reported, { inputTokens: 5_000, outputTokens: 400 })).toMatchObject({
      inputTokens: 5_000,
      outputTokens: 400,
      complete: false,
    });
    expect(usageOfModelCall(reported)).toMatchObject({ totalTokens: 0, complete: true });
  });
});
