// The SDK keeps a call to a tool it was not given when the answer says the provider ran it
// (providerExecuted, and dynamic): it neither marks it invalid nor answers it. The OpenAI
// Responses adapter makes such calls from `mcp_call` and `mcp_approval_request` items, named
// `mcp.<whatever the endpoint wrote>`, and a `web_search_call` one the SDK marks invalid but,
// being the provider's, leaves unanswered too. The run offers only its own tools and runs
// every call itself: such a call was run nowhere, and kept as one to run it parked a run with
// a tool name its state cannot hold (run-state-schema.ts), which then ended StateLost. Each is
// answered here as the SDK answers a call to a tool not offered (NoSuchToolError, as an
// error-text tool result) so the model reads why and the run goes on; the provider's own parts
// for it (its result, its approval request) are dropped, since nothing here ran or asks. Pure.
import { NoSuchToolError, type AssistantModelMessage, type ModelMessage, type ToolModelMessage, type ToolSet } from 'ai';

/** A tool call of the SDK's result, as far as this needs it. */
export interface ToolCallOfAnswer {
  readonly toolCallId: string;
  readonly toolName: string;
  readonly invalid?: boolean;
  readonly providerExecuted?: boolean;
}

export interface ToolCallsNotOffered {
  /** The response messages, each call not offered answered with a tool error. */
  readonly messages: ModelMessage[];
  /** The calls answered here, by id, with the error the model was told. */
  readonly answered: ReadonlyMap<string, string>;
}

/**
 * Whether the step must not run `call` though the SDK left it unanswered: the provider says it
 * ran it, or it names no own key of the offered tools. A call the SDK marked invalid and
 * answered itself (one not the provider's) is left to the SDK's answer.
 */
export function isToolCallNotOffered(call: ToolCallOfAnswer, offered: ToolSet): boolean {
  if (call.providerExecuted === true) return true;
  return call.invalid !== true && !Object.hasOwn(offered, call.toolName);
}

/** The SDK's response messages with every call not offered (isToolCallNotOffered) answered with a tool error. */
export function answerToolCallsNotOffered(
  messages: readonly ModelMessage[],
  toolCalls: readonly ToolCallOfAnswer[],
  offered: ToolSet,
): ToolCallsNotOffered {
  const answered = new Map<string, string>();
  for (const call of toolCalls) {
    if (isToolCallNotOffered(call, offered)) answered.set(call.toolCallId, notOfferedMessage(call, offered));
  }
  if (answered.size === 0) return { messages: [...messages], answered };
  const out: ModelMessage[] = [];
  for (let index = 0; index < messages.length; index += 1) {
    const message = messages[index]!;
    if (message.role !== 'assistant') {
      out.push(message);
      continue;
    }
    const { assistant, errors } = withoutProviderParts(message, answered);
    out.push(assistant);
    if (errors.length === 0) continue;
    const next = messages[index + 1];
    const order = callOrder(assistant);
    if (next?.role === 'tool') {
      out.push(sortResults({ ...next, content: [...next.content, ...errors] }, order));
      index += 1;
    } else {
      out.push(sortResults({ role: 'tool', content: errors }, order));
    }
  }
  return { messages: out, answered };
}

/** The SDK's own words for a tool not offered; a provider's call of an offered tool's name says where it went wrong. */
function notOfferedMessage(call: ToolCallOfAnswer, offered: ToolSet): string {
  const availableTools = Object.keys(offered);
  if (!Object.hasOwn(offered, call.toolName)) return new NoSuchToolError({ toolName: call.toolName, availableTools }).message;
  return (
    `Model tried to call tool '${call.toolName}' as one its provider runs, which this run does not offer: nothing ran. ` +
    `Call the run's tools as functions. Available tools: ${availableTools.join(', ')}.`
  );
}

type ToolResultPart = Extract<ToolModelMessage['content'][number], { type: 'tool-result' }>;

/**
 * The assistant message with each answered call made a plain call (the provider's flag and
 * options gone: it is answered here, not by the provider) and the provider's result and approval
 * request for it dropped; and the tool errors answering those calls, in the message's order.
 */
function withoutProviderParts(
  message: AssistantModelMessage,
  answered: ReadonlyMap<string, string>,
): { assistant: AssistantModelMessage; errors: ToolResultPart[] } {
  const errors: ToolResultPart[] = [];
  if (typeof message.content === 'string') return { assistant: message, errors };
  const content: Exclude<AssistantModelMessage['content'], string> = [];
  for (const part of message.content) {
    if (part.type === 'tool-call') {
      const error = answered.get(part.toolCallId);
      if (error === undefined) {
        content.push(part);
        continue;
      }
      // The provider's message format wants a call's arguments as a JSON object, as the SDK
      // sends an invalid call's unparsed input.
      const input = typeof part.input === 'object' && part.input !== null ? part.input : {};
      content.push({ type: 'tool-call', toolCallId: part.toolCallId, toolName: part.toolName, input });
      errors.push({
        type: 'tool-result',
        toolCallId: part.toolCallId,
        toolName: part.toolName,
        output: { type: 'error-text', value: error },
      });
      continue;
    }
    if ((part.type === 'tool-result' || part.type === 'tool-approval-request') && answered.has(part.toolCallId)) continue;
    content.push(part);
  }
  return { assistant: { ...message, content }, errors };
}

function callOrder(message: AssistantModelMessage): Map<string, number> {
  const order = new Map<string, number>();
  if (typeof message.content === 'string') return order;
  for (const part of message.content) if (part.type === 'tool-call' && !order.has(part.toolCallId)) order.set(part.toolCallId, order.size);
  return order;
}

/** The tool results in the order of their calls, as the SDK orders its own; other parts keep their places. */
function sortResults(message: ToolModelMessage, order: ReadonlyMap<string, number>): ToolModelMessage {
  const rank = (part: ToolResultPart) => order.get(part.toolCallId) ?? Number.MAX_SAFE_INTEGER;
  const results = message.content.filter((part): part is ToolResultPart => part.type === 'tool-result');
  const sorted = results.map((part, index) => ({ part, index })).sort((a, b) => rank(a.part) - rank(b.part) || a.index - b.index);
  let next = 0;
  return { ...message, content: message.content.map((part) => (part.type === 'tool-result' ? sorted[next++]!.part : part)) };
}
