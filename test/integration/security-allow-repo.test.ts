// Security #11.2: the chart's admission policy and the operator make the same allowRepo decision,
// because they evaluate the same RE2 expressions: the rendered policy's expressions are compared
// with the operator's, and every attack URL (and a few hundred mutations of allowed URLs) goes
// through the real API server with the rendered policy and through isRepositoryAllowed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { allowRepoPatternRegex, isRepositoryAllowed, patternNamesPunycode } from '../../operator/src/reconcile/allow-repo.ts';
import { CANONICAL_REPOSITORY_URL, DEFAULT_PORT_URL, PUNYCODE_HOST_URL } from '../../operator/src/reconcile/canonical-repository-url.ts';
import { attackAllowRepo, repoAttacks } from '../support/allow-repo-attacks.ts';
import { createNamespace, deleteNamespace, kubectl } from '../support/cluster.ts';
import { chartDir, helm } from '../support/helm.ts';

const RUNS = 'chamvi-allow-repo-runs';
const VALUES = 'chamvi-allow-repo-values';
const RELEASE = 'allow-repo-test';
const ROOT = '/srv/chamvi';
const ALLOW = attackAllowRepo(ROOT);
const VALUE_LABEL = 'chamvi-test/allow-repo-value';

interface Manifest {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec: any;
}

const helmTemplate = (args: string[]) => helm(['template', RELEASE, chartDir, ...args]);

/** Mutations of allowed URLs: a character that changes how a parser reads it, at every position. */
function mutations(): string[] {
  const seeds = ['https://github.com/acme/x', 'git@github.com:platform/x', 'ssh://git@github.com/platform/x', `file://${ROOT}/allowed/x`];
  const inserts = ['\\', '%2F', '%2E', '@', ':', '/', '.', '..', 'A', '-', '#', '?', ' ', ':443', 'xn--', '@evil.example'];
  const urls = new Set<string>();
  for (const seed of seeds) {
    for (let at = 0; at <= seed.length; at++) {
      for (const insert of inserts) urls.add(seed.slice(0, at) + insert + seed.slice(at));
    }
  }
  return [...urls];
}

/**
 * Creates each object with a server-side dry run in one kubectl call (admission runs, nothing is
 * stored) and returns the names the API server admitted.
 */
async function admitted(objects: Array<Record<string, unknown>>): Promise<Set<string>> {
  const result = await kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    timeoutMs: 300_000,
  });
  return new Set(
    result.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => line.slice(line.lastIndexOf('/') + 1)),
  );
}

let policy: Manifest;
let rendered: Manifest[];

beforeAll(async () => {
  await createNamespace(RUNS);
  await createNamespace(VALUES);
  const result = await helmTemplate([
    '--namespace',
    'chamvi-system',
    '--set-json',
    `config.allowRepo=${JSON.stringify(ALLOW)}`,
    '--set',
    'admissionPolicy.enabled=true',
    '--set',
    `admissionPolicy.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=${RUNS}`,
    '--show-only',
    'templates/admission-policy.yaml',
  ]);
  expect(result.stderr).toBe('');
  rendered = parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest)
    .filter(Boolean);
  policy = rendered.find((doc) => doc.kind === 'ValidatingAdmissionPolicy')!;

  // The same policy over ConfigMaps labelled as test values, reading the URL from data.url: the
  // policy's CEL for strings that the CodingRun schema would refuse before admission (spaces,
  // a leading "-"). Only the `url` variable and what the policy matches differ.
  const valuesPolicy = structuredClone(policy);
  valuesPolicy.metadata.name = `${RELEASE}-values`;
  valuesPolicy.spec.matchConstraints.resourceRules = [
    { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] },
  ];
  valuesPolicy.spec.variables.find((variable: { name: string }) => variable.name === 'url').expression = 'object.data.url';
  delete valuesPolicy.spec.matchConditions;
  const valuesBinding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: `${RELEASE}-values` },
    spec: {
      policyName: `${RELEASE}-values`,
      validationActions: ['Deny'],
      matchResources: {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': VALUES } },
        objectSelector: { matchLabels: { [VALUE_LABEL]: 'true' } },
      },
    },
  };
  const applied = await kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...rendered, valuesPolicy, valuesBinding] }),
  });
  expect(applied.stderr).toBe('');

  // The API server loads a new policy and binding asynchronously: wait until both bite.
  const probe = 'https://github.com\\acme\\x@evil.example';
  for (let attempt = 0; attempt < 120; attempt++) {
    const runs = await admitted([codingRun('probe', probe)]);
    const values = await admitted([valueMap('probe', probe)]);
    if (runs.size === 0 && values.size === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error('the admission policies did not take effect within 60 s');
});

afterAll(async () => {
  await kubectl([
    'delete',
    'validatingadmissionpolicy,validatingadmissionpolicybinding',
    `${RELEASE}-chamvi-operator-allow-repo`,
    `${RELEASE}-values`,
    '--ignore-not-found',
  ]);
  await deleteNamespace(RUNS);
  await deleteNamespace(VALUES);
});

function codingRun(name: string, url: string): Record<string, unknown> {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: RUNS },
    spec: { task: 'Fix it', repository: { url }, model: { provider: 'scripted', scriptRef: { name: 'script' } } },
  };
}

function valueMap(name: string, url: string): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: VALUES, labels: { [VALUE_LABEL]: 'true' } }, data: { url } };
}

describe('security #11.2 the admission policy and the operator decide allowRepo alike', () => {
  it("renders the operator's own expressions: the grammar and each pattern, character for character", () => {
    const variable = (name: string) => JSON.parse(policy.spec.variables.find((entry: { name: string }) => entry.name === name).expression);
    expect(variable('canonicalGrammar')).toBe(CANONICAL_REPOSITORY_URL);
    expect(variable('defaultPort')).toBe(DEFAULT_PORT_URL);
    expect(variable('punycodeHost')).toBe(PUNYCODE_HOST_URL);
    expect(variable('plainPatterns')).toEqual(ALLOW.filter((pattern) => !patternNamesPunycode(pattern)).map(allowRepoPatternRegex));
    expect(variable('punycodePatterns')).toEqual(ALLOW.filter(patternNamesPunycode).map(allowRepoPatternRegex));
  });

  it('fails the render, as the operator fails its start, on a pattern that can never match a canonical URL', async () => {
    for (const pattern of ['https://GitHub.com/acme/*', '**', 'https://github.com:443/acme/*', 'https://github.com/acme/*/']) {
      const result = await helmTemplate(['--set-json', `config.allowRepo=${JSON.stringify([pattern])}`]);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(`pattern ${JSON.stringify(pattern)} can never match a canonical repository URL`);
    }
    // Characters no canonical URL has are already refused by values.schema.json.
    const escaped = await helmTemplate(['--set-json', `config.allowRepo=${JSON.stringify(['https://github.com/acme%2F*'])}`]);
    expect(escaped.stderr).toContain("'/config/allowRepo/0': 'https://github.com/acme%2F*' does not match pattern");
  });

  it('admits a CodingRun exactly when the operator allows its repository, for every attack URL', async () => {
    const attacks = repoAttacks(ROOT);
    const names = await admitted(attacks.map((attack, index) => codingRun(`attack-${index}`, attack.url)));
    const disagreements = attacks
      .map((attack, index) => ({
        url: attack.url,
        apiServer: names.has(`attack-${index}`),
        operator: isRepositoryAllowed(attack.url, ALLOW).allowed,
      }))
      .filter((decision) => decision.apiServer !== decision.operator);
    expect(disagreements).toEqual([]);
    // Not vacuous: both sides allowed the controls and refused the rest.
    expect(names.size).toBe(attacks.filter((attack) => attack.allowed).length);
  });

  it("evaluates the policy's CEL like isRepositoryAllowed for every attack URL and its mutations, whatever the schema would refuse", async () => {
    const urls = [...new Set([...repoAttacks(ROOT).map((attack) => attack.url), ...mutations()])];
    const names = await admitted(urls.map((url, index) => valueMap(`value-${index}`, url)));
    const disagreements = urls
      .map((url, index) => ({ url, apiServer: names.has(`value-${index}`), operator: isRepositoryAllowed(url, ALLOW).allowed }))
      .filter((decision) => decision.apiServer !== decision.operator);
    expect(disagreements).toEqual([]);
    expect(names.size).toBeGreaterThan(10);
    expect(names.size).toBeLessThan(urls.length / 2);
  });

  it('#15.3: leaves a run whose repository comes from its template to the operator, and checks one the run sets itself', async () => {
    const templated = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name, namespace: RUNS },
      spec: { templateRef: { name: 'some-template' }, ...spec },
    });
    const names = await admitted([
      templated('from-template', { task: 'Fix it' }),
      templated('own-allowed', { repository: { url: 'https://github.com/acme/x' } }),
      templated('own-refused', { repository: { url: 'https://github.com/other/x' } }),
    ]);
    expect([...names].sort()).toEqual(['from-template', 'own-allowed']);
  });

  it('says why a URL is refused: not canonical, or matching no pattern', async () => {
    const refused = await kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: JSON.stringify(codingRun('why', 'https://github.com:443/acme/x')),
    });
    expect(refused.stderr).toContain('is refused because it is not a canonical repository URL');
    const unmatched = await kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: JSON.stringify(codingRun('why', 'https://github.com/other/x')),
    });
    expect(unmatched.stderr).toContain("is not allowed: it matches none of the operator's allowRepo patterns");
  });
});
