// The SDK answers a tool call it cannot use (arguments that are not JSON or do not fit the
// tool's schema, a tool not offered) itself, with a tool error in its response messages, and
// its InvalidToolInputError quotes the whole argument text: a 300 KB write_file that broke off
// mid-JSON came back as a 300 KB error, five times the bound every tool result the toolbox
// answers is held to, and the call's arguments stayed in the assistant message beside it.
// Those errors are bounded as results are (bound-tool-result.ts), and an invalid call's input
// over the same bound is replaced by {}, as the SDK itself replaces input it could not parse:
// the provider's message format wants a call's arguments to be a JSON object, and the model
// learns what it sent from the error's head and tail. Pure.
import type { AssistantModelMessage, ModelMessage, ToolModelMessage } from 'ai';
import { boundToolResult, TOOL_RESULT_LIMIT_BYTES } from './bound-tool-result.ts';

/**
 * The SDK's response messages with every tool error bounded to `limitBytes` and the input of
 * each call in `invalidCallIds` over that bound replaced by {}. Every tool result in them is
 * the SDK's own answer to a call it could not use: the toolbox's come later (tool-execution.ts).
 */
export function boundInvalidToolCalls(
  messages: readonly ModelMessage[],
  invalidCallIds: ReadonlySet<string>,
  limitBytes: number = TOOL_RESULT_LIMIT_BYTES,
): ModelMessage[] {
  return messages.map((message) => {
    if (message.role === 'tool') return boundErrors(message, limitBytes);
    if (message.role === 'assistant' && invalidCallIds.size > 0) return dropLargeInputs(message, invalidCallIds, limitBytes);
    return message;
  });
}

function boundErrors(message: ToolModelMessage, limitBytes: number): ToolModelMessage {
  return {
    ...message,
    content: message.content.map((part) => {
      if (part.type !== 'tool-result') return part;
      const { output } = part;
      if (output.type === 'error-text') return { ...part, output: { ...output, value: boundToolResult(output.value, limitBytes).text } };
      // The SDK's errors are strings; a structured one is bounded as its JSON text.
      if (output.type === 'error-json' && byteLength(output.value) > limitBytes) {
        const text = typeof output.value === 'string' ? output.value : JSON.stringify(output.value);
        return { ...part, output: { type: 'error-text' as const, value: boundToolResult(text, limitBytes).text } };
      }
      return part;
    }),
  };
}

function dropLargeInputs(message: AssistantModelMessage, invalidCallIds: ReadonlySet<string>, limitBytes: number): AssistantModelMessage {
  if (typeof message.content === 'string') return message;
  return {
    ...message,
    content: message.content.map((part) =>
      part.type === 'tool-call' && invalidCallIds.has(part.toolCallId) && byteLength(part.input) > limitBytes
        ? { ...part, input: {} }
        : part,
    ),
  };
}

const byteLength = (value: unknown) => Buffer.byteLength(typeof value === 'string' ? value : (JSON.stringify(value) ?? ''), 'utf8');
