// Which files the agent read and changed, taken from its tool calls rather than from any
// summary: a summary can forget or invent a path, and for a coding agent this list is what
// most needs to survive compaction. Only calls whose result came back without an error count
// (a failed edit changed nothing). The lists are carried in run state across compactions,
// because the calls themselves disappear into the summary.

import type { ModelMessage, ToolCallPart } from 'ai';

export interface FilesTouched {
  readonly read: readonly string[];
  readonly changed: readonly string[];
}

/** Tool name → what a successful call did to the file named by its `path` argument. */
const FILE_EFFECTS: Readonly<Record<string, 'read' | 'changed'>> = {
  read_file: 'read',
  write_file: 'changed',
  edit_file: 'changed',
  multi_edit: 'changed',
};

export function noFilesTouched(): FilesTouched {
  return { read: [], changed: [] };
}

export function collectFilesTouched(messages: readonly ModelMessage[], previous: FilesTouched = noFilesTouched()): FilesTouched {
  const read = new Set(previous.read);
  const changed = new Set(previous.changed);
  // A call's result is the first one after it with its id, before the next answer of the model:
  // an answer may hold two calls of one id (the first runs, the second is answered with a tool
  // error after its result, repeated-call-ids.ts), and a later answer may use the
  // id again for another call. Paired by id alone, either error hid the call that ran.
  let unanswered = new Map<string, ToolCallPart[]>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      unanswered = new Map();
      if (typeof message.content === 'string') continue;
      for (const part of message.content) {
        if (part.type === 'tool-call') unanswered.set(part.toolCallId, [...(unanswered.get(part.toolCallId) ?? []), part]);
      }
      continue;
    }
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type !== 'tool-result') continue;
      const call = unanswered.get(part.toolCallId)?.shift();
      const isError = part.output.type === 'error-text' || part.output.type === 'error-json' || part.output.type === 'execution-denied';
      if (call === undefined || isError) continue;
      const effect = FILE_EFFECTS[call.toolName];
      const path = pathArgument(call.input);
      if (effect === undefined || path === undefined) continue;
      (effect === 'read' ? read : changed).add(normalisePath(path));
    }
  }
  return { read: [...read].sort(), changed: [...changed].sort() };
}

function pathArgument(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const path = (input as { path?: unknown }).path;
  return typeof path === 'string' && path !== '' ? path : undefined;
}

// The toolbox accepts "src/a.ts" and "/workspace/src/a.ts" for the same file.
function normalisePath(path: string): string {
  return path.replace(/^\/workspace\//, '').replace(/^\.\//, '');
}
