// A model of the ai SDK's provider interface (LanguageModelV4) whose generate calls answer with
// the content the test makes, 30 tokens in and 12 out: for answers no scripted model gives (an
// answer held until the test lets it go, one generateText cannot work on). Streaming is refused.
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4Content } from '@ai-sdk/provider';

export const GENERATED_USAGE = { inputTokens: 30, outputTokens: 12 } as const;

export function generatingModel(
  name: string,
  answer: (options: LanguageModelV4CallOptions) => Promise<LanguageModelV4Content[]>,
): LanguageModelV4 {
  return {
    specificationVersion: 'v4',
    provider: name,
    modelId: name,
    supportedUrls: {},
    doGenerate: async (options) => ({
      content: await answer(options),
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: { total: GENERATED_USAGE.inputTokens, noCache: GENERATED_USAGE.inputTokens, cacheRead: 0, cacheWrite: undefined },
        outputTokens: { total: GENERATED_USAGE.outputTokens, text: GENERATED_USAGE.outputTokens, reasoning: 0 },
      },
      warnings: [],
    }),
    doStream: () => Promise.reject(new Error('not streamed')),
  };
}
