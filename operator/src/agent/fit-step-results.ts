// One step's tool results cut together to a token budget, so that the request after a step of
// many large results still fits the context window. Each result is bounded on its own (64 KiB,
// bound-tool-result.ts), but nine full reads are 150 000 tokens, and compaction cannot help: the
// newest step's calls and results are always kept whole (context-manager.ts). So, as chivgent
// says, the tool output is bounded instead: small results stay whole and the large ones share
// what is left equally. Each is cut as it was bounded when it came (fit-tool-result.ts): a text
// read loses whole lines and its endLine and truncated say where it stopped, anything else keeps
// its head and tail with a note saying what was cut and why. Images are not cut (they cost
// IMAGE_TOKENS whatever their size). Pure.
import type { ModelMessage, ToolModelMessage, ToolResultPart } from 'ai';
import { boundToolResult } from './bound-tool-result.ts';
import { estimatePartTokens } from './estimate-tokens.ts';
import { toolResultText } from './fit-tool-result.ts';

export interface FittedStepResults {
  readonly messages: readonly ModelMessage[];
  /** Results cut (0: the messages given, unchanged). */
  readonly cut: number;
}

/** What a cut result's note says limited it. */
const whyCut = (limitBytes: number) =>
  `this step's results together had to fit the model's context window, which left this one ${limitBytes} bytes`;

// A cut is measured and, when the estimate is still over, made again smaller: the estimate is
// not proportional to bytes (a note is added, a read loses whole lines). A few rounds suffice.
const FIT_ROUNDS = 8;

/**
 * The index of the current step's results: the newest message, when it is a tool message and
 * only tool messages stand between it and an assistant message that called tools. -1 otherwise:
 * results an answer or a user message came after (a verify retry) belong to an older step, which
 * a summary can fold, and the cut would be kept for good.
 */
export function currentStepResultsIndex(messages: readonly ModelMessage[]): number {
  const newest = messages.length - 1;
  let index = newest;
  while (index >= 0 && messages[index]?.role === 'tool') index -= 1;
  if (index === newest) return -1;
  const call = messages[index];
  const calledTools = call?.role === 'assistant' && Array.isArray(call.content) && call.content.some((part) => part.type === 'tool-call');
  return calledTools ? newest : -1;
}

/** The estimated tokens of the current step's results (0 when there are none). */
export function stepResultTokens(messages: readonly ModelMessage[]): number {
  const message = messages[currentStepResultsIndex(messages)] as ToolModelMessage | undefined;
  let total = 0;
  for (const part of message?.content ?? []) total += estimatePartTokens(part);
  return total;
}

/** The messages with the current step's results cut so that together they take at most `budgetTokens`. */
export function fitStepResults(messages: readonly ModelMessage[], budgetTokens: number): FittedStepResults {
  const index = currentStepResultsIndex(messages);
  if (index < 0) return { messages, cut: 0 };
  const message = messages[index] as ToolModelMessage;
  const sizes = message.content.map((part) => estimatePartTokens(part));
  const allotted = shareOut(sizes, Math.max(0, budgetTokens));
  let cut = 0;
  const content = message.content.map((part, at) => {
    const allowed = allotted[at]!;
    if (part.type !== 'tool-result' || sizes[at]! <= allowed) return part;
    const fitted = cutResult(part, sizes[at]!, allowed);
    if (fitted === part) return part;
    cut += 1;
    return fitted;
  });
  if (cut === 0) return { messages, cut };
  const fitted: ToolModelMessage = { ...message, content };
  return { messages: [...messages.slice(0, index), fitted, ...messages.slice(index + 1)], cut };
}

/**
 * Each part's share of the budget: parts under an equal share keep their size and leave the
 * rest to the others (smallest first), the larger ones get equal shares of what remains.
 */
export function shareOut(sizes: readonly number[], budget: number): number[] {
  const order = sizes.map((_size, at) => at).sort((left, right) => sizes[left]! - sizes[right]!);
  const allotted = new Array<number>(sizes.length).fill(0);
  let remaining = budget;
  order.forEach((at, position) => {
    const share = Math.floor(remaining / (order.length - position));
    allotted[at] = Math.min(sizes[at]!, share);
    remaining -= allotted[at];
  });
  return allotted;
}

/** The part cut to about `allowed` tokens; the part itself when its output is not one this cuts. */
function cutResult(part: ToolResultPart, tokens: number, allowed: number): ToolResultPart {
  const output = part.output;
  let text: string;
  let render: (limitBytes: number) => string;
  if (output.type === 'text') {
    text = output.value;
    const result = parsed(text);
    // A result the toolbox answered is JSON: cut as it was bounded (a read by whole lines). One
    // already cut by its bound is not JSON any more: its text is cut again, head and tail.
    render =
      result === undefined
        ? (limitBytes) => boundToolResult(text, limitBytes, whyCut(limitBytes)).text
        : (limitBytes) => toolResultText(part.toolName, result, limitBytes, whyCut(limitBytes));
  } else if ((output.type === 'error-text' || output.type === 'error-json') && typeof output.value === 'string') {
    text = output.value;
    render = (limitBytes) => boundToolResult(text, limitBytes, whyCut(limitBytes)).text;
  } else {
    return part;
  }
  const withText = (value: string): ToolResultPart => ({ ...part, output: { ...output, value } as ToolResultPart['output'] });
  const bytes = Buffer.byteLength(text, 'utf8');
  let limitBytes = Math.min(bytes - 1, Math.floor((bytes * allowed) / Math.max(1, tokens)));
  for (let round = 0; round < FIT_ROUNDS && limitBytes > 0; round += 1) {
    const candidate = withText(render(limitBytes));
    const candidateTokens = estimatePartTokens(candidate);
    if (candidateTokens <= allowed) return candidate;
    limitBytes = Math.floor(limitBytes * Math.min(0.9, allowed / candidateTokens));
  }
  // Not even a little fits: the note alone says what was there.
  return withText(render(0));
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
