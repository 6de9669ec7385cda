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
    total += estimateTextTokens(
      JSON.stringify({ name, description: definition.description, parameters: z.toJSONSchema(definition.inputSchema) }),
    );
  }
  return total;
}
