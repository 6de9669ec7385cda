// Wraps any LanguageModelV4 so the ai SDK only ever works on an answer within AnswerBounds
// (answer-bounds.ts says why), and tells the caller of each answer as it arrives: its usage,
// what the SDK is given of it, and what was dropped. The caller hears of the answer before
// the SDK works on it, so an SDK failure afterwards cannot lose the tokens it spent.

import type {
  LanguageModelV4,
  LanguageModelV4Content,
  LanguageModelV4StreamPart,
  LanguageModelV4ToolCall,
  LanguageModelV4Usage,
  SharedV4ProviderMetadata,
} from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';
import { estimateTextTokens } from '../agent/estimate-tokens.ts';
import { boundAnswerContent, boundAnswerPart, MAX_ANSWER_DEPTH, nestsDeeperThan, type AnswerBounds } from './answer-bounds.ts';

export interface ModelAnswer {
  /** As the provider reported it; figures it did not report are undefined. */
  readonly usage: LanguageModelV4Usage;
  /** What the SDK is given: the answer within the bounds (a stream's text and reasoning each joined into one part). */
  readonly content: readonly LanguageModelV4Content[];
  /** Tool calls past the bound, which the SDK never sees. */
  readonly droppedToolCalls: number;
  /**
   * Estimated tokens of those calls' tool names and arguments, as a kept call is estimated
   * (estimate-tokens.ts). They were received all the same, and an endpoint that reports no usage
   * is counted from what came back (usage-accounting.ts): of 5 000 calls, the 65 kept would count
   * for all. Counted at four characters a token instead, CJK or dense-digit arguments came to a
   * quarter of what the same calls count kept.
   */
  readonly droppedToolCallTokens: number;
  /** Arguments, results and metadata nested past the bound, replaced or dropped. */
  readonly tooDeepValues: number;
}

export interface WithAnswerBoundsOptions {
  readonly maxToolCalls: number;
  readonly maxDepth?: number;
  /** Told of each answer before the SDK works on it. */
  readonly onAnswer?: (answer: ModelAnswer) => void;
}

export function withAnswerBounds(model: LanguageModelV4, options: WithAnswerBoundsOptions): LanguageModelV4 {
  const bounds: AnswerBounds = { maxToolCalls: options.maxToolCalls, maxDepth: options.maxDepth ?? MAX_ANSWER_DEPTH };
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v4',
      wrapGenerate: async ({ doGenerate }) => {
        const result = await doGenerate();
        const bounded = boundAnswerContent(result.content, bounds);
        const metadataTooDeep = tooDeep(result.providerMetadata, bounds.maxDepth);
        options.onAnswer?.({
          usage: result.usage,
          content: bounded.content,
          droppedToolCalls: bounded.droppedToolCalls,
          droppedToolCallTokens: droppedCallTokens(result.content, bounds.maxToolCalls),
          tooDeepValues: bounded.tooDeepValues + (metadataTooDeep ? 1 : 0),
        });
        // usage.raw is the provider's usage object as it came (any JSON, any depth): nothing here
        // reads it, and a deep one would overflow whatever stringified the result.
        const { raw: _raw, ...usage } = result.usage;
        return { ...result, usage, content: bounded.content, ...(metadataTooDeep ? { providerMetadata: undefined } : {}) };
      },
      wrapStream: async ({ doStream }) => {
        const result = await doStream();
        return { ...result, stream: result.stream.pipeThrough(boundedStream(bounds, options.onAnswer)) };
      },
    },
  });
}

/** Estimated tokens of the tool calls past the first `maxToolCalls` (boundAnswerContent drops them). */
function droppedCallTokens(content: readonly LanguageModelV4Content[], maxToolCalls: number): number {
  let calls = 0;
  let tokens = 0;
  for (const part of content) {
    if (part.type !== 'tool-call') continue;
    calls += 1;
    if (calls > maxToolCalls) tokens += callTokens(part);
  }
  return tokens;
}

// One pass over each call's characters, as usage-accounting.ts estimates a kept call; the answer
// they came in was already read whole, so this costs no more than its download did.
const callTokens = (call: LanguageModelV4ToolCall) => estimateTextTokens(call.toolName) + estimateTextTokens(call.input);

function tooDeep(metadata: SharedV4ProviderMetadata | undefined, maxDepth: number): boolean {
  return metadata !== undefined && nestsDeeperThan(metadata, maxDepth);
}

/**
 * The stream's parts within the bounds: tool calls past the bound dropped with their input
 * parts (told apart by id, in the order their input starts), values nested too deep replaced
 * or dropped as in a whole answer.
 */
function boundedStream(
  bounds: AnswerBounds,
  onAnswer: ((answer: ModelAnswer) => void) | undefined,
): TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart> {
  let toolCalls = 0;
  let droppedToolCallTokens = 0;
  let tooDeepValues = 0;
  const admittedInputs = new Set<string>();
  let inputsStarted = 0;
  // What the caller is told the answer held; only collected for a caller that listens.
  const text: string[] = [];
  const reasoning: string[] = [];
  const calls: LanguageModelV4ToolCall[] = [];
  return new TransformStream({
    transform(given, controller) {
      if (given.type === 'tool-call') {
        toolCalls += 1;
        if (toolCalls > bounds.maxToolCalls) {
          // Its input parts were dropped too: the call carries the whole of its arguments.
          droppedToolCallTokens += callTokens(given);
          return;
        }
      }
      if (given.type === 'tool-input-start') {
        inputsStarted += 1;
        if (inputsStarted <= bounds.maxToolCalls) admittedInputs.add(given.id);
      }
      const toolInput = given.type === 'tool-input-start' || given.type === 'tool-input-delta' || given.type === 'tool-input-end';
      if (toolInput && !admittedInputs.has(given.id)) return;
      const bounded = boundAnswerPart(given, bounds.maxDepth);
      tooDeepValues += bounded.tooDeep;
      const part = bounded.part;
      if (onAnswer) {
        if (part.type === 'text-delta') text.push(part.delta);
        else if (part.type === 'reasoning-delta') reasoning.push(part.delta);
        else if (part.type === 'tool-call') calls.push(part);
        else if (part.type === 'finish')
          onAnswer({
            usage: part.usage,
            content: [
              ...(text.length > 0 ? [{ type: 'text' as const, text: text.join('') }] : []),
              ...(reasoning.length > 0 ? [{ type: 'reasoning' as const, text: reasoning.join('') }] : []),
              ...calls,
            ],
            droppedToolCalls: Math.max(0, toolCalls - bounds.maxToolCalls),
            droppedToolCallTokens,
            tooDeepValues,
          });
      }
      controller.enqueue(part);
    },
  });
}
