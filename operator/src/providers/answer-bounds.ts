// What of a model's answer the ai SDK is given to work on, decided before it sees the answer.
// The SDK's generateText does work per tool-call part that grows with the number of parts
// (each part is looked up among all the others), so an answer of 20 000 tool calls held a
// worker for seconds and 170 000 of them ran the operator out of heap, every run of the
// replica with it. And the SDK copies the answer recursively (clone-model-message.ts), as the
// run's state is written later (JSON.stringify): arguments, a provider tool's result or
// provider metadata nested a few thousand levels deep overflowed the stack. A step runs a
// bounded number of calls anyway (workers/tool-execution.ts): the calls past the bound are
// dropped here, unread; arguments and results nested too deep are replaced by a note the
// model gets back as the call's tool error, and metadata nested too deep is dropped. Pure.

import type {
  JSONValue,
  LanguageModelV4Content,
  LanguageModelV4ToolCall,
  LanguageModelV4ToolResult,
  SharedV4ProviderMetadata,
} from '@ai-sdk/provider';
import { jsonNestingDepth } from '../json/json-scan.ts';

export interface AnswerBounds {
  /** Tool calls of one answer the SDK gets; the later ones are dropped. */
  readonly maxToolCalls: number;
  /** Nesting (objects and arrays) of a call's arguments, a result or metadata past which it is not read. */
  readonly maxDepth: number;
}

/**
 * 64 levels: the toolbox's tools take flat objects (multi_edit's edits, the deepest, nest 3
 * levels) and provider metadata is a few levels of names and figures, so 64 is far more than
 * any of it needs, and some thirty times under the depth (about 2 000) at which the SDK's
 * recursive copy of an answer overflows the stack.
 */
export const MAX_ANSWER_DEPTH = 64;

export interface BoundedContent {
  readonly content: LanguageModelV4Content[];
  /** Tool calls past maxToolCalls, dropped. */
  readonly droppedToolCalls: number;
  /** Arguments, results and metadata nested past maxDepth, replaced or dropped. */
  readonly tooDeepValues: number;
}

export function boundAnswerContent(content: readonly LanguageModelV4Content[], bounds: AnswerBounds): BoundedContent {
  const kept: LanguageModelV4Content[] = [];
  let toolCalls = 0;
  let tooDeepValues = 0;
  for (const part of content) {
    if (part.type === 'tool-call') {
      toolCalls += 1;
      if (toolCalls > bounds.maxToolCalls) continue;
    }
    const bounded = boundAnswerPart(part, bounds.maxDepth);
    tooDeepValues += bounded.tooDeep;
    kept.push(bounded.part);
  }
  return { content: kept, droppedToolCalls: Math.max(0, toolCalls - bounds.maxToolCalls), tooDeepValues };
}

/** A part of an answer, whole (LanguageModelV4Content) or streamed (LanguageModelV4StreamPart). */
type AnswerPart = { readonly type: string; readonly providerMetadata?: SharedV4ProviderMetadata | undefined };

/**
 * The part itself, or a copy without what nests past `maxDepth`: a tool call's arguments or
 * a provider tool's result replaced by a note, its provider metadata dropped.
 */
export function boundAnswerPart<T extends AnswerPart>(part: T, maxDepth: number): { part: T; tooDeep: number } {
  let bounded = part;
  let tooDeep = 0;
  if (part.type === 'tool-call' && jsonNestingDepth((part as unknown as LanguageModelV4ToolCall).input) > maxDepth) {
    // A JSON string: it parses, and no tool takes a string (each takes an object), so the SDK
    // marks the call invalid and answers the model with a tool error quoting this note.
    bounded = { ...bounded, input: JSON.stringify(tooDeepNote(maxDepth)) };
    tooDeep += 1;
  }
  if (part.type === 'tool-result' && nestsDeeperThan((part as unknown as LanguageModelV4ToolResult).result, maxDepth)) {
    bounded = { ...bounded, result: `the result was nested more than ${maxDepth} levels deep, so it was not read` };
    tooDeep += 1;
  }
  if (part.providerMetadata !== undefined && nestsDeeperThan(part.providerMetadata, maxDepth)) {
    bounded = { ...bounded, providerMetadata: undefined };
    tooDeep += 1;
  }
  return { part: bounded, tooDeep };
}

export function tooDeepNote(maxDepth: number): string {
  return `the arguments of this call were nested more than ${maxDepth} levels deep, so they were not read; make the call again with the arguments its tool describes`;
}

/**
 * Whether objects and arrays in `value` nest more than `maxDepth` levels (`{}` is one), looked
 * at without recursion and given up at the first level past it. Values parsed from an answer
 * share no objects, so each is walked once.
 */
export function nestsDeeperThan(value: JSONValue | SharedV4ProviderMetadata | undefined, maxDepth: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (typeof next.value !== 'object' || next.value === null) continue;
    if (next.depth > maxDepth) return true;
    for (const child of Object.values(next.value)) {
      if (typeof child === 'object' && child !== null) pending.push({ value: child, depth: next.depth + 1 });
    }
  }
  return false;
}
