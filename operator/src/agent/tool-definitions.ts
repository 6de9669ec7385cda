// The tools the model may call, as an ai SDK ToolSet WITHOUT execute functions: the SDK only
// describes them to the model and validates its arguments; the step worker runs each call
// itself through the Sandbox (so calls can be gated by approval, ordered per file and
// recorded before the next step).
//
// How ai 6 reports a malformed call (checked against ai 6.0.x over HTTP, see
// test/unit/providers-http.test.ts): generateText does not throw. The call appears in
// `result.toolCalls` with `invalid: true`, `dynamic: true` and `error` (an
// InvalidToolInputError for unparseable or schema-violating arguments, NoSuchToolError for an
// unknown tool); `input` is the raw string when the JSON did not parse. `result.content` has
// a matching `tool-error` part, and `result.response.messages` already holds a tool message
// whose `tool-result` for that call has output `{type: 'error-text'}`. The worker therefore
// executes only the calls without `invalid`, and the model sees the error on the next step.

import { tool, zodSchema, type Schema, type ToolSet } from 'ai';
import type { z } from 'zod';
import { UnknownToolError } from './errors/unknown-tool-error.ts';

export interface ToolDefinition {
  readonly description: string;
  readonly inputSchema: z.ZodType;
}

/** Builds the ToolSet for `allowed` (spec.tools.allow) from the toolbox's definitions, in the order given. */
export function buildToolSet(allowed: readonly string[], definitions: Readonly<Record<string, ToolDefinition>>): ToolSet {
  const unknown = allowed.filter((name) => !Object.hasOwn(definitions, name));
  if (unknown.length > 0) throw new UnknownToolError(unknown, Object.keys(definitions));
  const tools: ToolSet = {};
  for (const name of allowed) {
    const definition = definitions[name];
    if (definition === undefined) continue;
    tools[name] = tool({ description: definition.description, inputSchema: schemaOf(definition.inputSchema) });
  }
  return tools;
}

// The SDK turns a zod schema into JSON Schema every time it describes the tools to a model
// (every step): a Schema made once per zod schema computes it on first use and keeps it.
const schemas = new WeakMap<z.ZodType, Schema>();

function schemaOf(inputSchema: z.ZodType): Schema {
  let schema = schemas.get(inputSchema);
  if (!schema) schemas.set(inputSchema, (schema = zodSchema(inputSchema as Parameters<typeof zodSchema>[0]) as Schema));
  return schema;
}
