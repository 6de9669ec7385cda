// The JSON a scripted run replays (API.md "The scripted model"). Objects are strict so a
// misspelt key ("toolcalls", "input_tokens") is reported instead of silently ignored.

import { z } from 'zod';
import { ModelScriptInvalidError, PROBLEMS_SHOWN } from '../errors/model-script-invalid-error.ts';

const tokenCount = z.number().int().nonnegative();

export const scriptedUsageSchema = z.strictObject({
  inputTokens: tokenCount.describe('prompt tokens, cached ones included'),
  outputTokens: tokenCount.describe('completion tokens, reasoning ones included'),
  cacheReadTokens: tokenCount.optional().describe('part of inputTokens read from the cache'),
  reasoningTokens: tokenCount.optional().describe('part of outputTokens spent on reasoning'),
});

export const scriptedToolCallSchema = z.strictObject({
  toolName: z.string().min(1, 'toolName must not be empty'),
  input: z.record(z.string(), z.unknown()).describe('the tool arguments, a JSON object'),
});

/**
 * Most tool calls one turn holds: twice what a step runs (MAX_TOOL_CALLS_PER_STEP, 64, in
 * workers/tool-execution.ts), so a script can still show a step over its cap. A 1 MiB script
 * held 22 000 calls in one turn, and the SDK's work on an answer grows faster than its calls
 * (providers/answer-bounds.ts): three such steps at once ran the operator out of heap.
 */
export const MAX_TURN_TOOL_CALLS = 128;

export const scriptedTurnSchema = z
  .strictObject({
    text: z.string().optional(),
    toolCalls: z
      .array(scriptedToolCallSchema)
      .max(MAX_TURN_TOOL_CALLS, {
        error: (issue) =>
          `a turn holds at most ${MAX_TURN_TOOL_CALLS} tool calls, this one ${Array.isArray(issue.input) ? issue.input.length : 'more'}`,
      })
      .optional(),
    usage: scriptedUsageSchema.optional(),
  })
  .refine((turn) => turn.text !== undefined || (turn.toolCalls?.length ?? 0) > 0, {
    message: 'a turn needs "text" or at least one entry in "toolCalls"',
  });

/** Most turns a script holds: more than any run takes (maxSteps is at most 1000), few enough to check at once. */
export const MAX_SCRIPT_TURNS = 10_000;

export const modelScriptSchema = z.strictObject({
  turns: z
    .array(scriptedTurnSchema)
    .min(1, 'a script needs at least one turn')
    .max(MAX_SCRIPT_TURNS, `a script holds at most ${MAX_SCRIPT_TURNS} turns`),
});

export type ModelScript = z.infer<typeof modelScriptSchema>;
export type ScriptedTurn = z.infer<typeof scriptedTurnSchema>;
export type ScriptedUsage = z.infer<typeof scriptedUsageSchema>;

/** Parses script text (the ConfigMap value); throws ModelScriptInvalidError listing every problem. */
export function parseModelScript(text: string): ModelScript {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON.parse's words: they quote the text ("hunter2-se"... is not valid JSON), and a
    // run may name any ConfigMap key of its namespace, which its author may not be let read.
    throw new ModelScriptInvalidError(['not valid JSON']);
  }
  // Counted before the turns are checked one by one: 340 000 empty turns fit in 1 MiB.
  const turns = (json as { turns?: unknown } | null)?.turns;
  if (Array.isArray(turns) && turns.length > MAX_SCRIPT_TURNS)
    throw new ModelScriptInvalidError([`turns: a script holds at most ${MAX_SCRIPT_TURNS} turns, this one ${turns.length}`]);
  const result = modelScriptSchema.safeParse(json);
  if (!result.success) {
    throw new ModelScriptInvalidError(
      result.error.issues.slice(0, PROBLEMS_SHOWN).map((issue) => {
        const path = issue.path.length === 0 ? '(root)' : issue.path.map(String).join('.');
        return `${path}: ${problemWords(issue)}`;
      }),
      result.error.issues.length,
    );
  }
  return result.data;
}

/**
 * What is wrong at one place of the script, in words that quote nothing of it: a run may name
 * any ConfigMap key of its namespace (as with JSON syntax, above), and zod's words for an
 * unknown key name it ("Unrecognized keys: "db_host", "api_token""), which told a run's author
 * the keys of a ConfigMap they may not read. Such a problem names the keys allowed there
 * instead, which is what a misspelt key's author needs. The other problems say what was
 * expected and which JSON type was found (or are this file's own words, with a count), and a
 * path only ever passes through keys of this schema: an unknown key stops it, and a tool call's
 * input, any JSON object, is not looked into.
 */
function problemWords(issue: z.core.$ZodIssue): string {
  if (issue.code !== 'unrecognized_keys') return issue.message;
  const allowed = keysAllowedAt(issue.path);
  return `unknown key(s); allowed here: ${allowed.map((key) => `"${key}"`).join(', ')}`;
}

/** The keys of the object schema at a path of the script (indices step into arrays). */
function keysAllowedAt(path: readonly PropertyKey[]): string[] {
  let schema: z.ZodType = modelScriptSchema;
  for (const step of path) {
    while (schema instanceof z.ZodOptional) schema = schema.unwrap() as z.ZodType;
    if (schema instanceof z.ZodArray) schema = schema.element as z.ZodType;
    else if (schema instanceof z.ZodObject) schema = schema.shape[String(step)] as z.ZodType;
    else return [];
  }
  while (schema instanceof z.ZodOptional) schema = schema.unwrap() as z.ZodType;
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}
