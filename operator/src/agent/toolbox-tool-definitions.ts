// The toolbox contract's schemas and descriptions as ToolDefinitions: the one place the
// agent binds to sandbox-image/toolbox/contract, so the model is told exactly what the
// toolbox validates.

import { TOOL_DESCRIPTIONS, toolInputSchemas, type ToolName } from '../../../sandbox-image/toolbox/contract/index.ts';
import type { ToolDefinition } from './tool-definitions.ts';

export function toolboxToolDefinitions(): Record<ToolName, ToolDefinition> {
  const definitions = {} as Record<ToolName, ToolDefinition>;
  for (const name of Object.keys(toolInputSchemas) as ToolName[]) {
    definitions[name] = { description: TOOL_DESCRIPTIONS[name], inputSchema: toolInputSchemas[name] };
  }
  return definitions;
}
