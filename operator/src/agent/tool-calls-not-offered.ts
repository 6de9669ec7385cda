// The SDK keeps a call to a tool it was not given when the answer says the provider ran it
// (providerExecuted, and dynamic): it neither marks it invalid nor answers it. The OpenAI
// Responses adapter makes such calls from `mcp_call` and `mcp_approval_request` items, named
// `mcp.<whatever the endpoint wrote>`, and a `web_search_call` one the SDK marks invalid but,
// being the provider's, leaves unanswered too. The run offers only its own tools and runs
// every call itself: such a call was run nowhere, and kept as one to run it parked a run with
// a tool name its state cannot hold (run-state-schema.ts), which then ended StateLost. Each is
// answered here as the SDK answers a call to a tool not offered (NoSuchToolError, as an
// error-text tool result) so the model reads why and the run goes on; the provider's own parts
// for it (its result, its approval request) are dropped, since nothing here ran or asks, and so
// is any such part whose id a call the run runs shares (a Responses answer may give an mcp_call
// the call_id of a function_call). An answered call goes back under a name any provider accepts
// in history (the model's name stays in the error text). Pure.
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
 * OpenAI's rule for a function name, which it may apply to the history sent too: a call answered
 * here under the model's name (`mcp.x`) could have failed every later request of the run. A
 * provider with a wider rule takes such a name as well.
 */
const PROVIDER_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** The name an answered call and its error go back under when the model's name is not one a provider accepts. */
const UNAVAILABLE_TOOL_NAME = 'unavailable_tool';

function sendableToolName(toolName: string): string {
  return PROVIDER_TOOL_NAME.test(toolName) ? toolName : UNAVAILABLE_TOOL_NAME;
}

/**
 * The assistant message with each answered call made a plain call (the provider's flag and
 * options gone: it is answered here, not by the provider) under a name a provider accepts, and
 * the provider's results and approval requests dropped but for a provider-run call left to the
 * provider (none is, today: isToolCallNotOffered answers each); and the tool errors answering
 * those calls, in the message's order. An assistant message holds a tool result or an approval
 * request only as the provider's own (the SDK answers the run's calls in a tool message, and the
 * run gates its calls itself): kept beside a call the run runs under the same id, it went back as
 * the provider's record of having run that call.
 */
function withoutProviderParts(
  message: AssistantModelMessage,
  answered: ReadonlyMap<string, string>,
): { assistant: AssistantModelMessage; errors: ToolResultPart[] } {
  const errors: ToolResultPart[] = [];
  if (typeof message.content === 'string') return { assistant: message, errors };
  const content: Exclude<AssistantModelMessage['content'], string> = [];
  const providerRun = providerRunCallIds(message.content, answered);
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
      const toolName = sendableToolName(part.toolName);
      content.push({ type: 'tool-call', toolCallId: part.toolCallId, toolName, input });
      errors.push({
        type: 'tool-result',
        toolCallId: part.toolCallId,
        toolName,
        output: { type: 'error-text', value: error },
      });
      continue;
    }
    if ((part.type === 'tool-result' || part.type === 'tool-approval-request') && !providerRun.has(part.toolCallId)) continue;
    content.push(part);
  }
  return { assistant: { ...message, content }, errors };
}

/** Ids whose every call in the message is provider-run and left unanswered: only their provider parts are kept. */
function providerRunCallIds(
  content: Exclude<AssistantModelMessage['content'], string>,
  answered: ReadonlyMap<string, string>,
): Set<string> {
  const providerRun = new Set<string>();
  const runHere = new Set<string>();
  for (const part of content) {
    if (part.type !== 'tool-call') continue;
    if (part.providerExecuted === true && !answered.has(part.toolCallId)) providerRun.add(part.toolCallId);
    else runHere.add(part.toolCallId);
  }
  for (const id of runHere) providerRun.delete(id);
  return providerRun;
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
