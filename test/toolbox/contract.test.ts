// The tool contract module the operator imports: pure, complete, and written for the model.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as contract from '../../sandbox-image/toolbox/contract/index.ts';

const contractDirectory = fileURLToPath(new URL('../../sandbox-image/toolbox/contract/', import.meta.url));

function undocumentedFields(schema: z.ZodType, at: string): string[] {
  if (schema instanceof z.ZodObject) {
    return Object.entries(schema.shape as Record<string, z.ZodType>).flatMap(([key, field]) => {
      const here = `${at}.${key}`;
      const missing = field.description ? [] : [here];
      let inner: z.ZodType = field;
      while (inner instanceof z.ZodOptional) inner = inner.unwrap() as z.ZodType;
      if (inner instanceof z.ZodArray) inner = inner.element as z.ZodType;
      return [...missing, ...(inner instanceof z.ZodObject ? undocumentedFields(inner, here) : [])];
    });
  }
  return [];
}

describe('tool contract', () => {
  // The names are the wire contract with the model and the approval policy; what is checked is
  // that each is well formed and has its schema and description (TypeScript makes the toolbox's
  // dispatch table cover each), not the list restated.
  it('names each tool once, in snake_case, with an input schema and a description', () => {
    expect(new Set(contract.TOOL_NAMES).size).toBe(contract.TOOL_NAMES.length);
    for (const name of contract.TOOL_NAMES) expect(name).toMatch(/^[a-z]+(_[a-z]+)*$/);
    expect(Object.keys(contract.toolInputSchemas).sort()).toEqual([...contract.TOOL_NAMES].sort());
    expect(Object.keys(contract.TOOL_DESCRIPTIONS).sort()).toEqual([...contract.TOOL_NAMES].sort());
  });

  it('describes every input field for the model', () => {
    const missing = contract.TOOL_NAMES.flatMap((name) => undocumentedFields(contract.toolInputSchemas[name], name));
    expect(missing).toEqual([]);
  });

  it('has no error code the toolbox never raises', () => {
    const toolboxDirectory = fileURLToPath(new URL('../../sandbox-image/toolbox/', import.meta.url));
    const source = readdirSync(toolboxDirectory)
      .filter((file) => file.endsWith('.ts'))
      .map((file) => readFileSync(`${toolboxDirectory}${file}`, 'utf8'))
      .join('\n');
    expect(new Set(contract.TOOL_ERROR_CODES).size).toBe(contract.TOOL_ERROR_CODES.length);
    expect(contract.TOOL_ERROR_CODES.filter((code) => !source.includes(`'${code}'`))).toEqual([]);
  });

  // The limits' values are not pinned here (that only restates limits.ts); what is checked is that the
  // schemas the toolbox enforces and the descriptions the model reads agree on them. read_file's and the
  // output cap's limits are checked by behaviour in read-file.test.ts and bash.test.ts.
  it('enforces the result limits it describes to the model', () => {
    const bounded = [
      ['grep', contract.SEARCH_MAX_RESULTS, { pattern: 'x' }],
      ['glob', contract.LIST_MAX_RESULTS, { pattern: '*' }],
      ['list_files', contract.LIST_MAX_RESULTS, {}],
    ] as const;
    for (const [tool, max, input] of bounded) {
      const schema = contract.toolInputSchemas[tool];
      expect(schema.safeParse({ ...input, limit: max }).success, `${tool} limit ${max}`).toBe(true);
      expect(schema.safeParse({ ...input, limit: max + 1 }).success, `${tool} limit ${max + 1}`).toBe(false);
      expect(JSON.stringify(z.toJSONSchema(schema)), tool).toContain(`at most ${max}`);
    }
  });

  it('is pure: zod and its own files only, no node: imports', () => {
    for (const file of readdirSync(contractDirectory)) {
      const imports = [...readFileSync(`${contractDirectory}${file}`, 'utf8').matchAll(/from '([^']+)'/g)].map((match) => match[1]);
      expect(
        imports.every((name) => name === 'zod' || name?.startsWith('./')),
        `${file}: ${imports.join(', ')}`,
      ).toBe(true);
    }
  });
});
