// The CodingEval CRD is generated and committed like the CodingRun one: fresh, described for
// kubectl explain, and its cross-field rules agree with the operator's predicates.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildCodingEvalCrd } from '../../operator/src/api/coding-eval-crd.ts';
import { graderPathRules, graderRules, taskRules } from '../../operator/src/api/coding-eval.ts';
import { renderCodingEvalCrdYaml } from '../../operator/src/api/crd-yaml.ts';
import { parseEvalSpec } from '../../operator/src/evals/parse-eval.ts';
import { codingEvalFixture } from '../support/coding-eval-fixture.ts';

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

  // A path is compared with the diff's as a string (a directory as a prefix): `test/` or
  // `./package.json` named nothing a diff holds, so file-unchanged on it could never fail.
  const NOT_CANONICAL = ['test/', './package.json', 'test//unit', 'a/../b', 'a/./b', '.', '..', 'src/..', 'src/.', '../x'];
  const CANONICAL = ['test', 'package.json', 'test/unit/a.test.js', '.github/workflows', '..hidden', 'a/.b', 'a...b'];

  it.each(NOT_CANONICAL)('refuses the grader path %j in the operator, with what to write instead', (path) => {
    const evaluation = codingEvalFixture({
      spec: {
        tasks: [
          { name: 'fix', task: 'Fix it.', repository: { url: 'https://example.com/r.git' }, graders: [{ type: 'file-unchanged', path }] },
        ],
      },
    });
    expect(graderPathRules.every((rule) => rule.holds(path))).toBe(false);
    expect(parseEvalSpec(evaluation)).toEqual({
      ok: false,
      problem: expect.stringMatching(/^spec\.tasks\.0\.graders\.0\.path: .*without \.\/, \/\/, \. or \.\. segments or a trailing \//),
    });
  });

  it.each(CANONICAL)('accepts the grader path %j', (path) => {
    expect(graderPathRules.every((rule) => rule.holds(path))).toBe(true);
    const evaluation = codingEvalFixture({
      spec: {
        tasks: [
          { name: 'fix', task: 'Fix it.', repository: { url: 'https://example.com/r.git' }, graders: [{ type: 'file-unchanged', path }] },
        ],
      },
    });
    expect(parseEvalSpec(evaluation).ok).toBe(true);
  });

  it("puts the path rule on the CRD's grader path, so kubectl apply refuses what the operator does", () => {
    const path = (root as { properties: Record<string, Node> }).properties.spec!;
    const grader = (((path.properties as Record<string, Node>).tasks!.items as Node).properties as Record<string, Node>).graders!;
    const field = ((grader.items as Node).properties as Record<string, Node>).path!;
    expect(field['x-kubernetes-validations']).toEqual([
      expect.objectContaining({ rule: graderPathRules[0]!.rule, reason: 'FieldValueInvalid' }),
    ]);
    // Each refused path trips one of the CEL rule's checks, each accepted one none.
    const checks = [...graderPathRules[0]!.rule.matchAll(/self(?: == '([^']*)'|\.(startsWith|endsWith|contains)\('([^']*)'\))/g)].map(
      ([, equal, method, text]) =>
        (value: string) =>
          equal !== undefined
            ? value === equal
            : method === 'startsWith'
              ? value.startsWith(text!)
              : method === 'endsWith'
                ? value.endsWith(text!)
                : value.includes(text!),
    );
    expect(checks.length).toBe(11);
    // An absolute path: the field's pattern refuses it first; the rule does too, on its own.
    expect(checks.some((check) => check('/etc/passwd'))).toBe(true);
    expect(graderPathRules[0]!.holds('/etc/passwd')).toBe(false);
    for (const refused of NOT_CANONICAL) expect(checks.some((check) => check(refused))).toBe(true);
    for (const accepted of CANONICAL) expect(checks.some((check) => check(accepted))).toBe(false);
  });
});
