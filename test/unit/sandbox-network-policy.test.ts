// The namespace's two sandbox NetworkPolicies (#17.5): together they must allow every pod
// exactly what its own per-run policy allowed, select every run's pod and no one else's, and
// a policy that is not exactly the operator's is never taken for it.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import {
  EGRESS_LABEL,
  SANDBOX_DENY_ALL_POLICY,
  SANDBOX_EGRESS_POLICY,
  isSandboxPolicyAsWanted,
  isSandboxPolicyLabelled,
  sandboxDenyAllPolicy,
  sandboxEgressPolicy,
  sandboxPoliciesFor,
} from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { claimPatch, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { buildIsolationProbePod } from '../../operator/src/reconcile/isolation-probe-pod.ts';
import { selectorMatches } from '../support/label-selector.ts';

const KEY = 'e'.repeat(64);
const config = loadOperatorConfig(
  {
    allowEgress: ['*'],
    egressKey: KEY,
    egressProxy: { host: 'chamvi-egress-proxy.chamvi-system.svc', address: '10.96.0.50', targetPort: 3129 },
  },
  {},
);

function parsedRun(uid: string, allow: string[] = []): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `run-${uid.slice(0, 4)}`, namespace: 'agents', uid },
    spec: codingRunSpec.parse({
      task: 'Fix it',
      repository: { url: 'https://github.com/acme/x' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
      sandbox: { egress: { allow } },
    }),
  };
}

const plain = parsedRun('11111111-1111-4111-8111-111111111111');
const egress = parsedRun('22222222-2222-4222-8222-222222222222', ['registry.npmjs.org']);
const denyAll = sandboxDenyAllPolicy('agents');
const egressPolicy = sandboxEgressPolicy('agents', config);
const labelsOf = (run: ParsedCodingRun) => buildSandboxPod(run, config).metadata!.labels!;

/** What a pod with these labels may do under the two policies, as a CNI adds them up. */
function allowed(labels: Record<string, string>) {
  const selecting = [denyAll, egressPolicy].filter((policy) => selectorMatches(policy.spec!.podSelector, labels));
  return {
    isolated: selecting.length > 0,
    ingress: selecting.flatMap((policy) => policy.spec!.ingress ?? []),
    egress: selecting.flatMap((policy) => policy.spec!.egress ?? []),
  };
}

describe('the namespace sandbox policies', () => {
  it('fence a run without egress in: selected, no ingress, no egress', () => {
    expect(allowed(labelsOf(plain))).toEqual({ isolated: true, ingress: [], egress: [] });
  });

  it('let a run with egress reach the proxy pods on their port and nothing else: no DNS, no ingress', () => {
    expect(labelsOf(egress)[EGRESS_LABEL]).toBe('proxy');
    expect(allowed(labelsOf(egress))).toEqual({
      isolated: true,
      ingress: [],
      egress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'chamvi-system' } },
              podSelector: { matchLabels: { 'app.kubernetes.io/name': 'chamvi-egress-proxy' } },
            },
          ],
          ports: [{ protocol: 'TCP', port: 3129 }],
        },
      ],
    });
    expect(egressPolicy.spec!.policyTypes).toEqual(['Egress']);
  });

  it('allow a CIDR instead when the proxy runs outside the cluster', () => {
    const outside = loadOperatorConfig({ egressKey: KEY, egressProxy: { address: '192.0.2.2', ipBlock: '192.0.2.2/32', port: 3128 } }, {});
    expect(sandboxEgressPolicy('agents', outside).spec!.egress).toEqual([
      { to: [{ ipBlock: { cidr: '192.0.2.2/32' } }], ports: [{ protocol: 'TCP', port: 3128 }] },
    ]);
  });

  it('give the egress label to no pod of a run without egress, whatever its own labels', () => {
    expect(labelsOf(plain)[EGRESS_LABEL]).toBeUndefined();
    expect(selectorMatches(egressPolicy.spec!.podSelector, labelsOf(plain))).toBe(false);
  });

  it('keep selecting a claimed warm pool pod (it gets the run uid label) and select no unclaimed pool pod nor probe pod', () => {
    const pool: WarmPoolConfig = { name: 'fast', namespace: 'agents', size: 1 };
    const poolPod = warmPoolPod(pool, config, plain);
    expect(selectorMatches(denyAll.spec!.podSelector, poolPod.metadata!.labels!)).toBe(false);
    const claimed = { ...poolPod.metadata!.labels! };
    for (const op of claimPatch(plain, pool, 360, 'uid-pool-pod') as Array<{ op: string; path: string; value?: string }>) {
      if (!op.path.startsWith('/metadata/labels/')) continue;
      const key = op.path.slice('/metadata/labels/'.length).replace(/~1/g, '/');
      if (op.op === 'remove') delete claimed[key];
      else if (op.op === 'add' || op.op === 'replace') claimed[key] = op.value!;
    }
    expect(allowed(claimed)).toEqual({ isolated: true, ingress: [], egress: [] });
    const probe = buildIsolationProbePod('agents', 'p1', config, 60);
    expect(selectorMatches(denyAll.spec!.podSelector, probe.metadata!.labels!)).toBe(false);
  });

  it('are what a run needs: the deny-all always, the egress policy only with egress', () => {
    expect(sandboxPoliciesFor(plain, config).map((policy) => policy.metadata!.name)).toEqual([SANDBOX_DENY_ALL_POLICY]);
    expect(sandboxPoliciesFor(egress, config).map((policy) => policy.metadata!.name)).toEqual([
      SANDBOX_DENY_ALL_POLICY,
      SANDBOX_EGRESS_POLICY,
    ]);
    for (const policy of sandboxPoliciesFor(egress, config)) {
      expect(policy.metadata!.namespace).toBe('agents');
      expect(policy.metadata!.ownerReferences).toBeUndefined();
      expect(isSandboxPolicyLabelled(policy)).toBe(true);
    }
  });
});

describe('isSandboxPolicyAsWanted', () => {
  it('takes the policy as the API server answers it: empty lists left out, keys in its order', () => {
    const answered = {
      metadata: { ...denyAll.metadata, uid: 'u', resourceVersion: '7', labels: { ...denyAll.metadata!.labels, extra: 'x' } },
      spec: { policyTypes: ['Egress', 'Ingress'], podSelector: { matchExpressions: [{ operator: 'Exists', key: 'chamvi.dev/run-uid' }] } },
    };
    expect(isSandboxPolicyAsWanted(answered, denyAll)).toBe(true);
    expect(isSandboxPolicyAsWanted(structuredClone(egressPolicy), egressPolicy)).toBe(true);
  });

  it.each([
    ['allows some egress', { ...denyAll, spec: { ...denyAll.spec!, egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] }] } }],
    [
      'selects every pod but no one in particular',
      { ...denyAll, spec: { ...denyAll.spec!, podSelector: { matchLabels: { nobody: 'x' } } } },
    ],
    ['is ingress only', { ...denyAll, spec: { ...denyAll.spec!, policyTypes: ['Ingress'] } }],
    ['lacks the operator labels', { ...denyAll, metadata: { ...denyAll.metadata, labels: {} } }],
    ['is in another namespace', { ...denyAll, metadata: { ...denyAll.metadata, namespace: 'other' } }],
    ['is the egress policy', egressPolicy],
    ['is absent', undefined],
  ])('refuses a deny-all that %s', (_why, found) => {
    expect(isSandboxPolicyAsWanted(found, denyAll)).toBe(false);
  });

  it("refuses an egress policy made for another proxy (the operator's config changed)", () => {
    const other = sandboxEgressPolicy(
      'agents',
      loadOperatorConfig({ egressKey: KEY, egressProxy: { address: '192.0.2.2', ipBlock: '192.0.2.2/32', port: 3128 } }, {}),
    );
    expect(isSandboxPolicyAsWanted(other, egressPolicy)).toBe(false);
    expect(isSandboxPolicyLabelled(other)).toBe(true);
  });
});
