// Who reaches the egress proxy's port, by the chart's NetworkPolicy: a run's proxy credential is
// in its sandbox pod's env, which `view` on pods reads, so the port admits only pods carrying
// the labels the operator puts on the sandbox of a run with egress, and with watchNamespaces
// only in those namespaces. The pods are the operator's own (buildSandboxPod, warmPoolPod and
// claimPatch), so a label the operator stops setting fails here. That sandboxes still get
// through on a node that enforces the policy is test/real-node/helm-install.test.ts.
import type { V1LabelSelector, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig, type OperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { claimPatch, warmPoolFor, warmPoolPod } from '../../operator/src/reconcile/warm-pool.ts';
import { chartDir, helm } from '../support/helm.ts';
import { selectorMatches } from '../support/label-selector.ts';

const RELEASE = 'proxy-policy';
const PROXY_PORT = 3128;

interface Manifest {
  kind: string;
  metadata: { name: string };
  [key: string]: any;
}

/** A NetworkPolicy as the chart renders it (client-node's type names `from` `_from`). */
interface Peer {
  namespaceSelector?: V1LabelSelector;
  podSelector?: V1LabelSelector;
}
interface NetworkPolicy {
  metadata: { name: string; namespace: string };
  spec: { ingress: Array<{ from?: Peer[]; ports?: Array<{ port: number }> }> };
}

/** The release's egress proxy policy and the operator config it renders, for these values. */
async function render(...args: string[]): Promise<{ policy: NetworkPolicy; config: OperatorConfig }> {
  const result = await helm(['template', RELEASE, chartDir, '--namespace', 'chamvi-system', '--set', 'egressProxy.enabled=true', ...args]);
  if (result.code !== 0) throw new Error(result.stderr);
  const docs = parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
  const policy = docs.find((doc) => doc.kind === 'NetworkPolicy' && doc.metadata.name === `${RELEASE}-chamvi-operator-egress-proxy`)!;
  const configMap = docs.find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === `${RELEASE}-chamvi-operator-config`)!;
  // The operator reads the Service's ClusterIP at run time; here an address stands in for it.
  const file = parseYaml(configMap.data['config.yaml'] as string) as { egressProxy: Record<string, unknown> };
  file.egressProxy.address = '10.96.0.50';
  const config = loadOperatorConfig(file, { CHAMVI_EGRESS_KEY: 'e'.repeat(64) });
  return { policy: policy as unknown as NetworkPolicy, config };
}

/** The `from` peers of the ingress rule that opens the proxy port. */
function proxyPortPeers(policy: NetworkPolicy): Peer[] {
  const rules = policy.spec.ingress.filter((rule) => rule.ports?.some((port) => port.port === PROXY_PORT));
  expect(rules).toHaveLength(1);
  return rules[0]!.from ?? [];
}

/**
 * Whether the policy lets a pod in `namespace` with `labels` connect to the proxy port, as a
 * CNI decides: a peer with a namespaceSelector matches namespaces by their labels (the API
 * server gives each kubernetes.io/metadata.name), one without means the policy's own namespace.
 */
function admits(policy: NetworkPolicy, namespace: string, labels: Record<string, string>): boolean {
  return proxyPortPeers(policy).some((peer) => {
    const inNamespace = peer.namespaceSelector
      ? selectorMatches(peer.namespaceSelector, { 'kubernetes.io/metadata.name': namespace })
      : namespace === policy.metadata.namespace;
    return inNamespace && selectorMatches(peer.podSelector, labels);
  });
}

function run(namespace: string, uid: string, egress: string[]): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `run-${uid}`, namespace, uid },
    spec: codingRunSpec.parse({
      task: 'Fix it',
      repository: { url: 'https://github.com/acme/x' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
      sandbox: { egress: { allow: egress } },
    }),
  };
}

const labelsOf = (pod: V1Pod) => pod.metadata!.labels!;
const hasCredential = (pod: V1Pod) => (pod.spec!.containers[0]!.env ?? []).some((variable) => variable.name === 'HTTPS_PROXY');

/** A pool pod's labels once the API server applied a claim's label operations. */
function claimedPoolPodLabels(config: OperatorConfig, namespace: string): Record<string, string> {
  const pool = { name: 'default', namespace, size: 1 };
  const claimer = run(namespace, 'uid-claimer', []);
  expect(warmPoolFor(claimer, config, [pool]).pool).toEqual(pool);
  const pod = warmPoolPod(pool, config, claimer);
  expect(hasCredential(pod)).toBe(false);
  const labels = { ...labelsOf(pod) };
  for (const op of claimPatch(claimer, pool, 60, 'uid-pod') as Array<{ op: string; path: string; value?: string }>) {
    if (!op.path.startsWith('/metadata/labels/')) continue;
    const key = op.path.slice('/metadata/labels/'.length).replace(/~1/g, '/').replace(/~0/g, '~');
    if (op.op === 'remove') delete labels[key];
    if (op.op === 'add') labels[key] = op.value!;
  }
  return labels;
}

describe("the egress proxy's NetworkPolicy", () => {
  it('with watchNamespaces, admits to the proxy port only sandbox pods of runs with egress in those namespaces', async () => {
    const { policy, config } = await render('--set', 'config.watchNamespaces={team-a}');
    const peers = proxyPortPeers(policy);
    // No peer opens the port to every namespace.
    for (const peer of peers) {
      expect(peer.namespaceSelector).toBeDefined();
      expect(peer.namespaceSelector).not.toEqual({} satisfies V1LabelSelector);
    }
    expect(peers.map((peer) => peer.namespaceSelector)).toEqual([
      { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a'] }] },
    ]);

    const sandbox = buildSandboxPod(run('team-a', 'uid-egress', ['registry.npmjs.org']), config);
    expect(hasCredential(sandbox)).toBe(true);
    expect(admits(policy, 'team-a', labelsOf(sandbox))).toBe(true);
    // The same labels from an unwatched namespace: someone else's pod there.
    expect(admits(policy, 'team-b', labelsOf(sandbox))).toBe(false);
    // A bystander's pod that only calls itself a sandbox.
    expect(admits(policy, 'team-a', { 'app.kubernetes.io/name': 'chamvi-sandbox' })).toBe(false);
    // A run without egress has no credential and no business with the proxy.
    const plain = buildSandboxPod(run('team-a', 'uid-plain', []), config);
    expect(hasCredential(plain)).toBe(false);
    expect(admits(policy, 'team-a', labelsOf(plain))).toBe(false);
  });

  it('watching every namespace, admits any namespace but still only the labels of a sandbox with egress', async () => {
    const { policy, config } = await render();
    const sandbox = buildSandboxPod(run('anywhere', 'uid-egress', ['registry.npmjs.org']), config);
    expect(admits(policy, 'anywhere', labelsOf(sandbox))).toBe(true);
    expect(admits(policy, 'elsewhere', { 'app.kubernetes.io/name': 'chamvi-sandbox' })).toBe(false);
    expect(admits(policy, 'elsewhere', { 'app.kubernetes.io/name': 'chamvi-sandbox', 'chamvi.dev/egress': 'proxy' })).toBe(false);
  });

  it('leaves out warm pool pods, claimed or not: a run with egress never takes one, so none holds a credential', async () => {
    const { policy, config } = await render('--set', 'config.watchNamespaces={team-a}');
    expect(
      warmPoolFor(run('team-a', 'uid-egress', ['registry.npmjs.org']), config, [{ name: 'default', namespace: 'team-a', size: 1 }]).pool,
    ).toBe(undefined);
    const unclaimed = warmPoolPod({ name: 'default', namespace: 'team-a', size: 1 }, config, run('team-a', 'uid-template', []));
    expect(admits(policy, 'team-a', labelsOf(unclaimed))).toBe(false);
    expect(admits(policy, 'team-a', claimedPoolPodLabels(config, 'team-a'))).toBe(false);
  });

  it('keeps the metrics port open to scrapers', async () => {
    const { policy } = await render();
    expect(policy.spec.ingress).toContainEqual({ ports: [{ port: 9090 }] });
  });
});
