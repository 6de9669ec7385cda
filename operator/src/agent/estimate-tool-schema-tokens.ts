// What the tool definitions cost in every request: the provider sends each tool's name,
// description and JSON schema with the messages, so a context estimate without them undercounts
// by thousands of tokens and compacts too late (the provider then refuses the request).
import { z } from 'zod';
import { estimateTextTokens } from './estimate-tokens.ts';
import type { ToolDefinition } from './tool-definitions.ts';

export function estimateToolSchemaTokens(allowed: readonly string[], definitions: Readonly<Record<string, ToolDefinition>>): number {
  let total = 0;
  for (const name of allowed) {
    const definition = definitions[name];
    if (definition === undefined) continue;
    total += toolTokens(name, definition);
  }
  return total;
}

// A definition does not change: its JSON Schema (a zod conversion, per step before) is worked out once.
const counted = new WeakMap<ToolDefinition, Map<string, number>>();

function toolTokens(name: string, definition: ToolDefinition): number {
  let byName = counted.get(definition);
  if (!byName) counted.set(definition, (byName = new Map()));
  let tokens = byName.get(name);
  if (tokens === undefined) {
    tokens = estimateTextTokens(
      JSON.stringify({ name, description: definition.description, parameters: z.toJSONSchema(definition.inputSchema) }),
    );
    byName.set(name, tokens);
  }
  return tokens;
}
