// allowRepo checked again where a worker uses the run's repository late (restore, publish): the
// cluster's list and the namespace's, which an admin may have narrowed since the run was admitted.
import { describe, expect, it } from 'vitest';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';
import { repositoryAllowedNow } from '../../operator/src/workers/repository-allowed-now.ts';

const url = 'https://github.com/acme/webapp.git';
const clonePolicy = { allowRepo: ['https://github.com/acme/*'] };
const namespaces = (annotations: Record<string, Record<string, string>>) => ({
  policyOf: async (namespace: string) => readNamespacePolicy(annotations[namespace] ?? {}),
});

describe('repositoryAllowedNow', () => {
  it("refuses a repository the run's namespace was taken off since, saying it is the namespace's list", async () => {
    const decision = await repositoryAllowedNow(
      { clonePolicy, namespacePolicies: namespaces({ 'team-a': { 'chamvi.dev/allow-repo': 'https://github.com/acme/docs.git' } }) },
      'team-a',
      url,
    );
    expect(decision).toEqual({
      allowed: false,
      message: expect.stringMatching(/^namespace team-a is narrowed by its chamvi\.dev\/allow-repo annotation/),
    });
  });

  it("allows it where the namespace's list still has it, or the namespace has none", async () => {
    const policies = namespaces({ 'team-a': { 'chamvi.dev/allow-repo': 'https://github.com/acme/webapp.git' } });
    expect(await repositoryAllowedNow({ clonePolicy, namespacePolicies: policies }, 'team-a', url)).toEqual({ allowed: true, url });
    expect(await repositoryAllowedNow({ clonePolicy, namespacePolicies: policies }, 'team-b', url)).toEqual({ allowed: true, url });
  });

  it("never widens the cluster's list", async () => {
    const policies = namespaces({ 'team-a': { 'chamvi.dev/allow-repo': 'https://evil.example/*' } });
    const decision = await repositoryAllowedNow({ clonePolicy, namespacePolicies: policies }, 'team-a', 'https://evil.example/x.git');
    expect(decision.allowed).toBe(false);
  });
});
