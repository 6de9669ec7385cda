// The CRD is generated from the zod schemas and committed; these tests keep it fresh and
// check the properties a structural schema and `kubectl explain` depend on.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildCodingRunCrd } from '../../operator/src/api/crd.ts';
import { renderCrdYaml } from '../../operator/src/api/crd-yaml.ts';
import { renderApiReference } from '../../operator/src/api/api-reference.ts';
import { codingRunSpec } from '../../operator/src/api/coding-run-spec.ts';

const committed = new URL('../../crds/chamvi.dev_codingruns.yaml', import.meta.url);

type Node = Record<string, unknown>;

function walk(node: Node, path: string, visit: (node: Node, path: string) => void) {
  visit(node, path);
  for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Node>)) walk(child, `${path}.${name}`, visit);
  if (node.items && typeof node.items === 'object') walk(node.items as Node, `${path}[]`, visit);
  if (node.additionalProperties && typeof node.additionalProperties === 'object')
    walk(node.additionalProperties as Node, `${path}{}`, visit);
}

const version = buildCodingRunCrd().spec.versions[0]!;
const root = version.schema.openAPIV3Schema as unknown as Node;

describe('CodingRun CRD', () => {
  it('matches the committed crds/ file (run `make crds` when this fails)', () => {
    expect(readFileSync(committed, 'utf8')).toBe(renderCrdYaml());
  });

  it('has a fresh docs/api-reference.md that names every spec field (run `make crds` when this fails)', () => {
    const reference = readFileSync(new URL('../../docs/api-reference.md', import.meta.url), 'utf8');
    expect(reference).toBe(renderApiReference());
    expect(reference).toContain('| `spec.budget.maxSteps` | integer |');
    expect(reference).toContain('baseURL is required when provider is openai-compatible');
  });

  it('describes every field of spec and status, so kubectl explain is useful', () => {
    const missing: string[] = [];
    for (const part of ['spec', 'status']) {
      walk((root.properties as Record<string, Node>)[part]!, part, (node, path) => {
        if (typeof node.description !== 'string' || node.description.length < 10) missing.push(path);
      });
    }
    expect(missing).toEqual([]);
  });

  it('is structural: every node has a type, except int-or-string quantities', () => {
    const untyped: string[] = [];
    walk(root, '', (node, path) => {
      if (node['x-kubernetes-int-or-string'] === true) return;
      if (typeof node.type !== 'string') untyped.push(path);
      if (node.properties && node.additionalProperties !== undefined) untyped.push(`${path} (properties and additionalProperties)`);
    });
    expect(untyped).toEqual([]);
  });

  it("stores a spec as written: no server-side defaults outside list items, so a template run keeps its template's values (#15.3)", () => {
    const defaulted: string[] = [];
    const visit = (node: Node, path: string) => {
      if ('default' in node) defaulted.push(path);
      for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Node>)) visit(child, `${path}.${name}`);
    };
    visit((root.properties as Record<string, Node>).spec!, 'spec');
    expect(defaulted).toEqual([]);
    // The operator's parse applies them instead, for every reader.
    const parsed = codingRunSpec.parse({
      task: 'x',
      repository: { url: 'https://github.com/acme/x.git' },
      model: { provider: 'openai', name: 'm', apiKeySecretRef: { name: 'llm' } },
    });
    expect(parsed.budget).toEqual({ maxSteps: 40, timeout: '30m' });
    expect(parsed.model.apiKeySecretRef?.key).toBe('apiKey');
  });

  it('refuses at kubectl apply the sandbox resources and zero timeouts the operator refuses', () => {
    const spec = (root.properties as Record<string, Node>).spec!;
    const child = (node: Node, ...names: string[]) => names.reduce((at, name) => (at.properties as Record<string, Node>)[name]!, node);
    const rules = (node: Node) => ((node['x-kubernetes-validations'] ?? []) as { rule: string; message: string }[]).map((r) => r.rule);
    for (const side of ['limits', 'requests']) {
      const list = child(spec, 'sandbox', 'resources', side);
      expect(rules(list)).toContain("self.all(name, name in ['cpu', 'memory', 'ephemeral-storage'])");
      const value = list.additionalProperties as Node;
      // The pattern only sees strings; an integer needs the minimum.
      expect(value.minimum).toBe(0);
      const pattern = new RegExp(value.pattern as string);
      expect(['-1Gi', '+1', '-0.5'].filter((text) => pattern.test(text))).toEqual([]);
      expect(['500m', '2Gi', '1e9', '.5', '4'].every((text) => pattern.test(text))).toBe(true);
    }
    // A zero limit is no limit (the kubelet sets none, a quota counts 0); a zero request asks for nothing.
    const aboveZero = (side: string) => rules(child(spec, 'sandbox', 'resources', side)).filter((rule) => rule.includes('quantity('));
    expect(aboveZero('limits')).toEqual([expect.stringContaining("['cpu', 'memory', 'ephemeral-storage'].all(name, ")]);
    expect(aboveZero('requests')).toEqual([]);
    for (const timeout of [child(spec, 'budget', 'timeout'), child(spec, 'approval', 'timeout')]) {
      expect(rules(timeout)).toContain("duration(self) >= duration('1ms')");
    }
    // spec.verify's rules sit on the object (the timeout has a default there): has() guards them.
    expect(rules(child(spec, 'verify'))).toContain("!has(self.timeout) || duration(self.timeout) >= duration('1ms')");
  });

  // Short name, printer columns, required fields and server-side defaults are not restated here from
  // crd.ts: test/integration/crd.test.ts sees them on a real API server (kubectl get crun, -o wide,
  // refusals naming the missing field, the defaults filled in).
});
