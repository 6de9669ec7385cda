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
  it('names the twelve tools of TOOLS.md', () => {
    expect(contract.TOOL_NAMES).toEqual([
      'read_file',
      'write_file',
      'edit_file',
      'multi_edit',
      'grep',
      'glob',
      'list_files',
      'bash',
      'bash_output',
      'bash_kill',
      'git_diff',
      'read_repository_instructions',
    ]);
    expect(Object.keys(contract.TOOL_DESCRIPTIONS).sort()).toEqual([...contract.TOOL_NAMES].sort());
  });

  it('describes every input field for the model', () => {
    const missing = contract.TOOL_NAMES.flatMap((name) => undocumentedFields(contract.toolInputSchemas[name], name));
    expect(missing).toEqual([]);
  });

  it('has the stable error codes', () => {
    expect(contract.TOOL_ERROR_CODES).toEqual([
      'INVALID_INPUT',
      'NOT_FOUND',
      'OUTSIDE_WORKSPACE',
      'DENIED_PATH',
      'NOT_UNIQUE',
      'NO_MATCH',
      'NO_CHANGE',
      'TOO_LARGE',
      'BINARY',
      'IS_DIRECTORY',
      'TIMEOUT',
      'JOB_NOT_FOUND',
      'IO_ERROR',
    ]);
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
