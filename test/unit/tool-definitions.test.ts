import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UnknownToolError } from '../../operator/src/agent/errors/unknown-tool-error.ts';
import { buildToolSet } from '../../operator/src/agent/tool-definitions.ts';
import { toolboxToolDefinitions } from '../../operator/src/agent/toolbox-tool-definitions.ts';
import { TOOL_NAMES } from '../../operator/src/api/tool-names.ts';

const definitions = {
  read_file: { description: 'Read a file', inputSchema: z.object({ path: z.string() }) },
  bash: { description: 'Run a command', inputSchema: z.object({ command: z.string() }) },
};

describe('buildToolSet', () => {
  it('offers exactly the allowed tools, without execute functions', () => {
    const tools = buildToolSet(['read_file'], definitions);
    expect(Object.keys(tools)).toEqual(['read_file']);
    expect(tools.read_file?.description).toBe('Read a file');
    // The worker executes calls through the Sandbox; an execute here would run them in-process.
    expect(tools.read_file?.execute).toBeUndefined();
  });

  it('refuses an allowed tool nobody defines', () => {
    expect(() => buildToolSet(['read_file', 'deploy'], definitions)).toThrowError(UnknownToolError);
    try {
      buildToolSet(['deploy'], definitions);
    } catch (error) {
      expect(UnknownToolError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain('Use only: read_file, bash');
    }
  });

  it('can build every tool the API names from the toolbox contract', () => {
    const tools = buildToolSet(TOOL_NAMES, toolboxToolDefinitions());
    expect(Object.keys(tools)).toEqual([...TOOL_NAMES]);
    for (const tool of Object.values(tools)) expect(tool.description?.length).toBeGreaterThan(10);
  });
});

describe('the tool schemas are converted once', () => {
  it('hands every step the same schema object, whose JSON Schema is worked out on first use and kept', () => {
    const first = buildToolSet(['read_file', 'bash'], definitions);
    const second = buildToolSet(['bash', 'read_file'], definitions);
    expect(second.read_file?.inputSchema).toBe(first.read_file?.inputSchema);
    expect(second.bash?.inputSchema).toBe(first.bash?.inputSchema);
    const schema = first.read_file!.inputSchema as { jsonSchema: object };
    expect(schema.jsonSchema).toBe(schema.jsonSchema);
    expect(schema.jsonSchema).toMatchObject({ type: 'object', properties: { path: { type: 'string' } } });
  });
});
