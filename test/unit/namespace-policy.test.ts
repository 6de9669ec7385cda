// Issue #15.4: a team's settings come from annotations on its Namespace, and its lists only
// ever narrow the cluster's: a run passes the cluster's list AND the namespace's.
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { readNamespacePolicy, utcDay } from '../../operator/src/reconcile/namespace-policy.ts';
import { parseSpec, validateRun } from '../../operator/src/reconcile/validate-run.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig(
  {
    allowRepo: ['https://github.com/acme/*'],
    allowImages: ['registry.acme.dev/sandboxes/*'],
    allowModelEndpoints: ['https://llm.acme.dev/v1'],
    allowEgress: ['registry.npmjs.org'],
    egressProxy: { host: '10.0.0.9' },
    egressKey: 'k'.repeat(32),
  },
  {},
);
const references = {
  secrets: { llm: ['apiKey'] },
  configMaps: { script: ['script.json'] },
  secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' } },
};

function verdict(spec: Record<string, unknown>, annotations?: Record<string, string>) {
  const run = codingRunFixture({ spec });
  const parsed = parseSpec(run);
  if (!parsed.ok) throw new Error(parsed.refusal.message);
  return validateRun(run, parsed.spec, config, references, readNamespacePolicy(annotations));
}

const repo = (url: string) => ({ repository: { url } });
const image = (name: string) => ({ sandbox: { image: name } });
const endpoint = (baseURL: string) => ({
  model: { provider: 'openai-compatible', name: 'm', baseURL, apiKeySecretRef: { name: 'llm' }, scriptRef: undefined },
});
const egress = (host: string) => ({ sandbox: { egress: { allow: [host] } } });

describe('readNamespacePolicy', () => {
  it('reads limits and comma- or newline-separated lists', () => {
    expect(
      readNamespacePolicy({
        'chamvi.dev/max-active-runs': '3',
        'chamvi.dev/tokens-per-day': ' 200000 ',
        'chamvi.dev/allow-repo': 'https://github.com/acme/web, https://github.com/acme/api\nhttps://github.com/acme/docs',
        'other.io/unrelated': 'x',
      }),
    ).toEqual({
      maxActiveRuns: 3,
      tokensPerDay: 200000,
      allowRepo: ['https://github.com/acme/web', 'https://github.com/acme/api', 'https://github.com/acme/docs'],
      problems: [],
    });
  });

  it('fails closed: a malformed limit counts as 0 and is named; an empty list allows nothing', () => {
    const policy = readNamespacePolicy({
      'chamvi.dev/max-active-runs': 'lots',
      'chamvi.dev/tokens-per-day': '-5',
      'chamvi.dev/allow-repo': '',
    });
    expect(policy).toMatchObject({ maxActiveRuns: 0, tokensPerDay: 0, allowRepo: [] });
    expect(policy.problems).toEqual([
      'chamvi.dev/max-active-runs: "lots" is not a whole number, so it counts as 0',
      'chamvi.dev/tokens-per-day: "-5" is not a whole number, so it counts as 0',
    ]);
  });

  it('counts tokens per UTC day', () => {
    expect(utcDay(new Date('2026-11-29T23:59:59-05:00'))).toBe('2026-11-30');
  });
});

describe('a namespace narrows the cluster lists, and can never widen them', () => {
  it.each([
    ['allowRepo', repo('https://github.com/acme/web.git'), { 'chamvi.dev/allow-repo': 'https://github.com/acme/web*' }, undefined],
    ['allowRepo', repo('https://github.com/acme/api.git'), { 'chamvi.dev/allow-repo': 'https://github.com/acme/web' }, 'RepoNotAllowed'],
    ['allowRepo', repo('https://github.com/acme/api.git'), { 'chamvi.dev/allow-repo': '' }, 'RepoNotAllowed'],
    [
      'allowImages',
      image('registry.acme.dev/sandboxes/node:22'),
      { 'chamvi.dev/allow-images': 'registry.acme.dev/sandboxes/python:*' },
      'ImageNotAllowed',
    ],
    [
      'allowImages',
      image('registry.acme.dev/sandboxes/python:3'),
      { 'chamvi.dev/allow-images': 'registry.acme.dev/sandboxes/python:*' },
      undefined,
    ],
    ['allowModelEndpoints', endpoint('https://llm.acme.dev/v1'), { 'chamvi.dev/allow-model-endpoints': '' }, 'ModelEndpointNotAllowed'],
    ['allowEgress', egress('registry.npmjs.org'), { 'chamvi.dev/allow-egress': '' }, 'InvalidSpec'],
  ])('%s: %j in a namespace with %j → %s', (_list, spec, annotations, reason) => {
    expect(verdict(spec, annotations)?.reason).toBe(reason);
  });

  it.each([
    [
      'allowRepo',
      repo('https://github.com/evil/exfil.git'),
      { 'chamvi.dev/allow-repo': 'https://github.com/*, https://github.com/evil/*' },
      'RepoNotAllowed',
    ],
    ['allowImages', image('docker.io/evil/miner:1'), { 'chamvi.dev/allow-images': '**' }, 'ImageNotAllowed'],
    [
      'allowModelEndpoints',
      endpoint('https://evil.example/v1'),
      { 'chamvi.dev/allow-model-endpoints': 'https://evil.example/v1' },
      'ModelEndpointNotAllowed',
    ],
    ['allowEgress', egress('pastebin.com'), { 'chamvi.dev/allow-egress': '*, pastebin.com' }, 'InvalidSpec'],
  ])('%s: an annotation naming %j outside the cluster list does not allow it', (_list, spec, annotations, reason) => {
    const refusal = verdict(spec, annotations);
    expect(refusal?.reason).toBe(reason);
    // Refused by the cluster's own list, before the namespace's is even read.
    expect(refusal?.message).not.toContain('narrowed');
  });

  it("says the refusal comes from the namespace's annotations, naming its list", () => {
    const refusal = verdict(repo('https://github.com/acme/api.git'), { 'chamvi.dev/allow-repo': 'https://github.com/acme/web' });
    expect(refusal?.message).toContain('namespace agents is narrowed by its chamvi.dev/allow-* annotations');
    expect(refusal?.message).toContain('https://github.com/acme/web');
  });

  it('a namespace without annotations gets the cluster lists as they are', () => {
    expect(verdict(repo('https://github.com/acme/api.git'))).toBeUndefined();
    expect(verdict(egress('registry.npmjs.org'))).toBeUndefined();
    expect(verdict(repo('https://github.com/other/api.git'))?.reason).toBe('RepoNotAllowed');
  });
});
