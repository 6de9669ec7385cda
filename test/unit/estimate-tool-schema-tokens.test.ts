// The context estimate counts the tool schemas sent with every request.
import { describe, expect, it } from 'vitest';
import { estimateToolSchemaTokens } from '../../operator/src/agent/estimate-tool-schema-tokens.ts';
import { toolboxToolDefinitions } from '../../operator/src/agent/toolbox-tool-definitions.ts';

const TOOL_DEFINITIONS = toolboxToolDefinitions();

describe('estimateToolSchemaTokens', () => {
  it('counts every allowed tool: descriptions and schemas, about four characters a token', () => {
    const all = Object.keys(TOOL_DEFINITIONS) as (keyof typeof TOOL_DEFINITIONS)[];
    const characters = all.reduce((sum, name) => sum + TOOL_DEFINITIONS[name].description.length, 0);
    const tokens = estimateToolSchemaTokens(all, TOOL_DEFINITIONS);
    // More than the descriptions alone (the schemas count too), and in the thousands for the full set.
    expect(tokens).toBeGreaterThan(Math.ceil(characters / 4));
    expect(tokens).toBeGreaterThan(1_000);
  });

  it('counts only the tools the run allows', () => {
    const one = estimateToolSchemaTokens(['read_file'], TOOL_DEFINITIONS);
    expect(one).toBeGreaterThan(0);
    expect(estimateToolSchemaTokens(['read_file', 'bash'], TOOL_DEFINITIONS)).toBeGreaterThan(one);
    expect(estimateToolSchemaTokens([], TOOL_DEFINITIONS)).toBe(0);
  });
});
