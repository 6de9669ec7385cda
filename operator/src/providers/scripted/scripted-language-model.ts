// A real ai SDK LanguageModel (specification v4) that replays a script instead of calling a
// model: for demos, tests and reproducing a run. Deterministic and stateless; see
// scripted-turn-index.ts for how a call picks its turn.

import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import type { ModelScript, ScriptedUsage } from './model-script-schema.ts';
import { scriptedTurnIndex } from './scripted-turn-index.ts';

interface PlayedTurn {
  readonly index: number;
  readonly text: string | undefined;
  readonly toolCalls: ReadonlyArray<{ toolCallId: string; toolName: string; input: string }>;
  readonly usage: LanguageModelV4Usage;
}

export class ScriptedLanguageModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider = 'scripted';
  readonly modelId: string;
  readonly supportedUrls: Record<string, RegExp[]> = {};
  private readonly script: ModelScript;

  constructor(script: ModelScript, modelId = 'script') {
    this.script = script;
    this.modelId = modelId;
  }

  /** The turn a call with this prompt plays (exposed for tests and logs). */
  playTurn(options: Pick<LanguageModelV4CallOptions, 'prompt'>): PlayedTurn {
    const index = scriptedTurnIndex(options.prompt);
    const turn = this.script.turns[index];
    if (turn === undefined) {
      // The script ran out: the run ends with the last text. This call is not a model call
      // at all, so it reports an explicit zero rather than "no usage".
      return { index, text: lastScriptText(this.script), toolCalls: [], usage: toV4Usage({ inputTokens: 0, outputTokens: 0 }) };
    }
    return {
      index,
      text: turn.text,
      toolCalls: (turn.toolCalls ?? []).map((call, callIndex) => ({
        // Deterministic ids, so a redone step produces the same transcript.
        toolCallId: `scripted-t${index}-c${callIndex}`,
        toolName: call.toolName,
        input: JSON.stringify(call.input),
      })),
      usage: toV4Usage(turn.usage),
    };
  }

  async doGenerate(options: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
    options.abortSignal?.throwIfAborted();
    const played = this.playTurn(options);
    const content: LanguageModelV4Content[] = [];
    if (played.text !== undefined && played.text !== '') content.push({ type: 'text', text: played.text });
    for (const call of played.toolCalls) content.push({ type: 'tool-call', ...call });
    return {
      content,
      finishReason: finishReason(played),
      usage: played.usage,
      response: { id: `scripted-turn-${played.index}`, modelId: this.modelId },
      warnings: [],
    };
  }

  async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
    options.abortSignal?.throwIfAborted();
    const played = this.playTurn(options);
    const parts: LanguageModelV4StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: `scripted-turn-${played.index}`, modelId: this.modelId },
    ];
    if (played.text !== undefined && played.text !== '') {
      const id = `text-${played.index}`;
      parts.push({ type: 'text-start', id }, { type: 'text-delta', id, delta: played.text }, { type: 'text-end', id });
    }
    for (const call of played.toolCalls) {
      parts.push(
        { type: 'tool-input-start', id: call.toolCallId, toolName: call.toolName },
        { type: 'tool-input-delta', id: call.toolCallId, delta: call.input },
        { type: 'tool-input-end', id: call.toolCallId },
        { type: 'tool-call', ...call },
      );
    }
    parts.push({ type: 'finish', usage: played.usage, finishReason: finishReason(played) });
    return {
      stream: new ReadableStream<LanguageModelV4StreamPart>({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      }),
    };
  }
}

function finishReason(played: PlayedTurn): LanguageModelV4GenerateResult['finishReason'] {
  return played.toolCalls.length > 0 ? { unified: 'tool-calls', raw: 'tool_calls' } : { unified: 'stop', raw: 'stop' };
}

function lastScriptText(script: ModelScript): string {
  for (let index = script.turns.length - 1; index >= 0; index -= 1) {
    const text = script.turns[index]?.text;
    if (text !== undefined) return text;
  }
  return '';
}

/** A turn without usage reports none: every figure undefined, as a provider that sent nothing. */
function toV4Usage(usage: ScriptedUsage | undefined): LanguageModelV4Usage {
  if (usage === undefined) {
    return {
      inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    };
  }
  const cacheRead = usage.cacheReadTokens ?? 0;
  const reasoning = usage.reasoningTokens ?? 0;
  return {
    inputTokens: { total: usage.inputTokens, noCache: usage.inputTokens - cacheRead, cacheRead, cacheWrite: undefined },
    outputTokens: { total: usage.outputTokens, text: usage.outputTokens - reasoning, reasoning },
  };
}
