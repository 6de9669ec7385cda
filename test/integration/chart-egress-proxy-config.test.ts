// The egress proxy's config as the chart renders it, read by the proxy's own loader
// (egress/egress-proxy-config.ts): egressProxy.readApiServerEndpoints both grants the Role in
// `default` on the API server's EndpointSlice and tells the proxy whether to read that slice, so
// a proxy the chart grants nothing there does not ask for it every 30 s (api-server-slice.ts).
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadEgressProxyConfig, type EgressProxyConfig } from '../../operator/src/egress/egress-proxy-config.ts';
import { chartDir, helm } from '../support/helm.ts';

const RELEASE = 'proxy-config';

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  [key: string]: any;
}

/** The proxy's config as it loads it, and the Roles the chart makes in `default`, for these values. */
async function render(...args: string[]): Promise<{ config: EgressProxyConfig; rolesInDefault: string[] }> {
  const result = await helm(['template', RELEASE, chartDir, '--namespace', 'chamvi-system', '--set', 'egressProxy.enabled=true', ...args]);
  if (result.code !== 0) throw new Error(result.stderr);
  const docs = parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
  const configMap = docs.find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === `${RELEASE}-chamvi-operator-egress-proxy`)!;
  return {
    config: loadEgressProxyConfig(parseYaml(configMap.data['config.yaml'] as string), { CHAMVI_EGRESS_KEY: 'e'.repeat(64) }),
    rolesInDefault: docs.filter((doc) => doc.kind === 'Role' && doc.metadata.namespace === 'default').map((doc) => doc.metadata.name),
  };
}

describe("the egress proxy's readApiServerEndpoints, as the chart renders it", () => {
  it('by default, grants the Role on the slice and tells the proxy to read it', async () => {
    const { config, rolesInDefault } = await render();
    expect(rolesInDefault).toHaveLength(1);
    expect(config.readApiServerEndpoints).toBe(true);
  });

  it.each([[[]], [['--set', 'config.watchNamespaces={team-a}']]])(
    'set false, grants nothing in default and tells the proxy not to read the slice (%j)',
    async (args) => {
      const { config, rolesInDefault } = await render('--set', 'egressProxy.readApiServerEndpoints=false', ...args);
      expect(rolesInDefault).toEqual([]);
      expect(config.readApiServerEndpoints).toBe(false);
    },
  );
});
