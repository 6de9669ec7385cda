// A tool call the provider cut off at the model's output limit (finishReason `length`): its
// arguments end mid-JSON, so the SDK marks the call invalid and answers it itself with
// "JSON parsing failed" and the truncated text. A model told only that writes the same long
// call again and is cut again, and three such steps ended the run blaming tool calling. The
// cut call's answer says instead what happened and how to fit. Pure.
import { InvalidToolInputError, type ModelMessage, type ToolModelMessage } from 'ai';

/** What the model is told of the call its answer was cut off in. */
export const CUT_OFF_TOOL_CALL_RESULT =
  "OUTPUT_LIMIT: your answer reached the model's output limit while it was writing this call's arguments, so they were cut off " +
  'and the call did not run. Send less in one answer: write a large file in parts (write_file with the first part, then ' +
  'add the rest with further calls), and make fewer or smaller calls at once.';

/** A tool call of the SDK's result, as far as this needs it. */
export interface AnsweredToolCall {
  readonly toolCallId: string;
  readonly invalid?: boolean;
  readonly error?: unknown;
}

/**
 * The call an answer was cut off in, if any: the answer ended at the output limit, so only its
 * last call can be unfinished, and that one only when its arguments did not make a valid input
 * (an InvalidToolInputError; a tool not offered is the model's mistake, told as the SDK
 * tells it). `droppedToolCalls`: calls past the answer's bound the SDK never saw
 * (providers/with-answer-bounds.ts); with any, the answer's last call is not among these.
 */
export function cutOffToolCallId(finishReason: string, toolCalls: readonly AnsweredToolCall[], droppedToolCalls = 0): string | undefined {
  if (finishReason !== 'length' || droppedToolCalls > 0) return undefined;
  const last = toolCalls.at(-1);
  return last?.invalid === true && InvalidToolInputError.isInstance(last.error) ? last.toolCallId : undefined;
}

/** The SDK's response messages with the cut-off call's tool error replaced by CUT_OFF_TOOL_CALL_RESULT. */
export function explainCutOffToolCall(messages: readonly ModelMessage[], toolCallId: string | undefined): ModelMessage[] {
  if (toolCallId === undefined) return [...messages];
  return messages.map((message) => (message.role === 'tool' ? explainIn(message, toolCallId) : message));
}

function explainIn(message: ToolModelMessage, toolCallId: string): ToolModelMessage {
  return {
    ...message,
    content: message.content.map((part) =>
      part.type === 'tool-result' && part.toolCallId === toolCallId
        ? { ...part, output: { type: 'error-text' as const, value: CUT_OFF_TOOL_CALL_RESULT } }
        : part,
    ),
  };
}
