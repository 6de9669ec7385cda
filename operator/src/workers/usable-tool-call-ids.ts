// A model's tool call ids as the run keeps them. The id is the model's (or its endpoint's)
// free text, and everything after the answer carries it: the run's state (whose schema takes
// at most 512 characters: a longer id made the next load fail, and the run ended StateLost),
// the toolbox's call journal (`s<step>:<id>`, at most 256 characters: a longer one was
// refused, and every call of the answer failed). An id the run cannot keep is replaced where
// the answer is taken in, before anything else sees it; repeated ids are the other half of
// this (repeated-call-ids.ts).
import { createHash } from 'node:crypto';
import type { ModelMessage } from 'ai';

/**
 * The longest tool call id kept as the model gave it. Providers' own ids are far shorter
 * (OpenAI's `call_` and 24 characters, Anthropic's `toolu_` and 24, vLLM's
 * `chatcmpl-tool-` and 32); this leaves them room and keeps `s<step>:<id>` within the
 * toolbox's 256 characters at any step.
 */
export const MAX_TOOL_CALL_ID_CHARS = 128;

/**
 * The id the run uses for a call the model gave `id`: the same id when it is usable, else
 * `call_` and 32 hex digits of its SHA-256. Derived from the id alone, so every part that
 * names one call (the assistant's tool call, the SDK's tool error for it, its result) gets the
 * same replacement without a table, two calls that shared a long id still share one (and
 * the second is answered as a repeated id), and a step redone from its saved answer keeps it.
 * 37 characters: endpoints that bound the ids they are sent back (OpenAI's chat API takes 40)
 * take it.
 */
export function usableToolCallId(id: string): string {
  if (id.length >= 1 && id.length <= MAX_TOOL_CALL_ID_CHARS) return id;
  return `call_${createHash('sha256').update(id, 'utf8').digest('hex').slice(0, 32)}`;
}

/**
 * The answer's messages with every tool call id made usable: the assistant's tool calls, and
 * the tool errors and results the SDK wrote for them. Messages without an unusable id are
 * returned as they are.
 */
export function withUsableToolCallIds(messages: readonly ModelMessage[]): ModelMessage[] {
  return messages.map((message) => {
    if ((message.role !== 'assistant' && message.role !== 'tool') || typeof message.content === 'string') return message;
    const content = message.content as ReadonlyArray<{ readonly toolCallId?: unknown }>;
    if (!content.some((part) => typeof part.toolCallId === 'string' && usableToolCallId(part.toolCallId) !== part.toolCallId))
      return message;
    return {
      ...message,
      content: content.map((part) =>
        typeof part.toolCallId === 'string' ? { ...part, toolCallId: usableToolCallId(part.toolCallId) } : part,
      ),
    } as ModelMessage;
  });
}
