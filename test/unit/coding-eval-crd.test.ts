// The CodingEval CRD is generated and committed like the CodingRun one: fresh, described for
// kubectl explain, and its cross-field rules agree with the operator's predicates.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildCodingEvalCrd } from '../../operator/src/api/coding-eval-crd.ts';
import { graderRules, taskRules } from '../../operator/src/api/coding-eval.ts';
import { renderCodingEvalCrdYaml } from '../../operator/src/api/crd-yaml.ts';

type Node = Record<string, unknown>;

function walk(node: Node, path: string, visit: (node: Node, path: string) => void) {
  visit(node, path);
  for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Node>)) walk(child, `${path}.${name}`, visit);
  if (node.items && typeof node.items === 'object') walk(node.items as Node, `${path}[]`, visit);
}

const root = buildCodingEvalCrd().spec.versions[0]!.schema.openAPIV3Schema as unknown as Node;

describe('CodingEval CRD', () => {
  it('matches the committed crds/ file (run `make crds` when this fails)', () => {
    expect(readFileSync(new URL('../../crds/chamvi.dev_codingevals.yaml', import.meta.url), 'utf8')).toBe(renderCodingEvalCrdYaml());
  });

  it('describes every field of spec and status, so kubectl explain is useful', () => {
    const missing: string[] = [];
    for (const part of ['spec', 'status'])
      walk((root.properties as Record<string, Node>)[part]!, part, (node, path) => {
        if (typeof node.description !== 'string' || node.description.length < 2) missing.push(path);
      });
    expect(missing).toEqual([]);
  });

  it('refuses in the operator what CEL refuses at apply: a grader naming a tool the task does not allow', () => {
    const [rule] = taskRules;
    expect(rule!.holds({ tools: { allow: ['read_file'] }, graders: [{ type: 'not-used-tool', tool: 'write_file' }] })).toBe(false);
    expect(rule!.holds({ tools: { allow: ['read_file'] }, graders: [{ type: 'used-tool', tool: 'read_file' }] })).toBe(true);
    expect(rule!.holds({ graders: [{ type: 'used-tool', tool: 'write_file' }] })).toBe(true);
  });

  it('asks each grader type for exactly its fields', () => {
    const holds = (grader: { type: string; path?: string; text?: string; tool?: string; max?: number }) =>
      graderRules.every((rule) => rule.holds(grader));
    expect(holds({ type: 'file-contains', path: 'a', text: 'b' })).toBe(true);
    expect(holds({ type: 'file-contains', path: 'a' })).toBe(false);
    expect(holds({ type: 'used-tool' })).toBe(false);
    expect(holds({ type: 'max-tool-calls', max: 3, tool: 'bash' })).toBe(true);
    expect(holds({ type: 'verify', tool: 'bash' })).toBe(false);
  });
});
