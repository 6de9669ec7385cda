// The egress proxy's part of a release, as the tests of what its ServiceAccount may write install
// it on the test control plane: the chart rendered in one namespace watching that namespace, of
// which they apply the proxy's ServiceAccount, Role and binding and its admission policies (not
// its Deployment), and an API client holding a real token of that ServiceAccount, so the real API
// server judges what the proxy's own code writes.
import { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';
import { kubeconfigPath, kubectl, kubectlOk } from './cluster.ts';
import { chartDir, helm } from './helm.ts';

export interface RenderedManifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
}

export interface EgressProxyRelease {
  /** The proxy's name: its ServiceAccount, Role and RoleBinding. */
  proxy: string;
  /** Its ServiceAccount as the API server names the requester. */
  user: string;
  /** The proxy's ServiceAccount, Roles and bindings (cluster-wide ones too, would the chart render any). */
  rbac: RenderedManifest[];
  /** The proxy's ValidatingAdmissionPolicies and their bindings: cluster-scoped. */
  policies: RenderedManifest[];
}

/** Objects as one multi-document YAML, for kubectl apply and delete. */
export const manifestsYaml = (manifests: readonly object[]): string => manifests.map((doc) => stringify(doc)).join('---\n');

/** The release `release` installed in `namespace` watching `namespace`, with the proxy; nothing applied yet. */
export async function renderEgressProxyRelease(release: string, namespace: string): Promise<EgressProxyRelease> {
  const rendered = await helm([
    'template',
    release,
    chartDir,
    '--namespace',
    namespace,
    '--set',
    'egressProxy.enabled=true',
    '--set',
    'egressProxy.readApiServerEndpoints=false',
    '--set',
    `config.watchNamespaces={${namespace}}`,
  ]);
  if (rendered.code !== 0) throw new Error(rendered.stderr);
  const manifests = parseAllDocuments(rendered.stdout)
    .map((doc) => doc.toJS() as RenderedManifest | null)
    .filter((doc): doc is RenderedManifest => doc !== null);
  const proxy = `${release}-chamvi-operator-egress-proxy`;
  return {
    proxy,
    user: `system:serviceaccount:${namespace}:${proxy}`,
    rbac: manifests.filter(
      (doc) =>
        ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(doc.kind) && doc.metadata.name === proxy,
    ),
    policies: manifests.filter((doc) => doc.kind.startsWith('ValidatingAdmissionPolicy') && doc.metadata.name.includes('egress-proxy')),
  };
}

export async function applyManifests(manifests: readonly object[]): Promise<void> {
  await kubectlOk(['apply', '-f', '-'], { input: manifestsYaml(manifests) });
}

/** Removes the cluster-scoped policies after a file: they hold names a `helm install` elsewhere owns. */
export async function deleteManifests(manifests: readonly object[]): Promise<void> {
  if (manifests.length > 0) await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: manifestsYaml(manifests) });
}

/** A KubeConfig for the admin's cluster holding a real token of the proxy's ServiceAccount. */
export async function egressProxyKubeConfig(release: EgressProxyRelease, namespace: string): Promise<KubeConfig> {
  const token = (await kubectlOk(['create', 'token', release.proxy, '-n', namespace, '--duration=1h'])).trim();
  const admin = new KubeConfig();
  admin.loadFromFile(kubeconfigPath());
  const cluster = admin.getCurrentCluster()!;
  const proxy = new KubeConfig();
  proxy.loadFromOptions({
    clusters: [cluster],
    users: [{ name: release.proxy, token }],
    contexts: [{ name: release.proxy, cluster: cluster.name, user: release.proxy }],
    currentContext: release.proxy,
  });
  return proxy;
}
