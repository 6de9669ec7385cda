// Where the chart's egress proxy pods may connect, by their egress NetworkPolicy: a second guard
// behind the proxy's own address check, so a compromised or mistaken proxy still cannot reach the
// cloud metadata services. The excepted addresses are the ones egress/address-class.ts classes
// as metadata or link-local, so the two lists cannot drift apart unnoticed. That the proxy still
// reaches the API server, DNS and a registry under the policy on a node that enforces it is
// test/real-node/helm-install.test.ts.
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { classifyAddress } from '../../operator/src/egress/address-class.ts';
import { chartDir, helm } from '../support/helm.ts';

const RELEASE = 'proxy-egress';
const POLICY = `${RELEASE}-chamvi-operator-egress-proxy-egress`;

interface Peer {
  ipBlock?: { cidr: string; except?: string[] };
  namespaceSelector?: Record<string, unknown>;
  podSelector?: Record<string, unknown>;
}
interface EgressRule {
  to?: Peer[];
  ports?: Array<{ port: number; protocol?: string }>;
}
interface Manifest {
  kind: string;
  metadata: { name: string };
  spec?: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; egress?: EgressRule[] };
}

async function egressPolicy(...args: string[]): Promise<Manifest | undefined> {
  const result = await helm(['template', RELEASE, chartDir, '--namespace', 'chamvi-system', ...args]);
  if (result.code !== 0) throw new Error(result.stderr);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .find((doc): doc is Manifest => doc?.kind === 'NetworkPolicy' && doc.metadata.name === POLICY);
}

const ipBlocks = (policy: Manifest) =>
  policy.spec!.egress!.flatMap((rule) => (rule.ports ? [] : (rule.to ?? []))).filter((peer) => peer.ipBlock);

describe("the egress proxy's own egress NetworkPolicy", () => {
  it('selects the proxy pods and limits their egress', async () => {
    const policy = (await egressPolicy('--set', 'egressProxy.enabled=true'))!;
    expect(policy.spec!.podSelector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'chamvi-egress-proxy',
      'app.kubernetes.io/instance': RELEASE,
    });
    expect(policy.spec!.policyTypes).toEqual(['Egress']);
  });

  it('opens every address but the metadata services and link-local, for IPv4 and IPv6', async () => {
    const blocks = ipBlocks((await egressPolicy('--set', 'egressProxy.enabled=true'))!).map((peer) => peer.ipBlock);
    expect(blocks).toEqual([
      { cidr: '0.0.0.0/0', except: ['169.254.0.0/16', '100.100.100.200/32', '168.63.129.16/32'] },
      { cidr: '::/0', except: ['fe80::/10', 'fd00:ec2::254/128', 'fd20:ce::254/128'] },
    ]);
    // The proxy's own check closes the same addresses, for everyone.
    for (const except of blocks.flatMap((block) => block!.except!)) {
      expect([except, classifyAddress(except.split('/')[0]!)]).toEqual([except, expect.stringMatching(/^(metadata|link-local)$/)]);
    }
    for (const metadata of ['169.254.169.254', '100.100.100.200', '168.63.129.16', 'fd00:ec2::254', 'fd20:ce::254']) {
      expect(classifyAddress(metadata)).toBe('metadata');
    }
  });

  it('lets the proxy ask DNS on port 53 at the excepted addresses and in-cluster pods, naming them as peers', async () => {
    // NodeLocal DNSCache (169.254.20.10) and GKE's Cloud DNS (169.254.169.254:53) answer on
    // link-local addresses the first rule excepts; CoreDNS answers on pod IPs an ipBlock may not
    // match. Port 53 anywhere else is in the first rule already. The peers are named, not left
    // out: the AWS VPC CNI's policy controller turned a rule with no `to` into 0.0.0.0/0 and ::/0
    // and merged it by CIDR with the first rule (amazon-network-policy-controller-k8s#98,
    // aws-network-policy-agent#481), leaving the proxy port 53 alone or DNS at 169.254.20.10 denied.
    const policy = (await egressPolicy('--set', 'egressProxy.enabled=true'))!;
    const rules = policy.spec!.egress!;
    const dns = rules.filter((rule) => rule.ports);
    const excepted = ipBlocks(policy).flatMap((peer) => peer.ipBlock!.except!);
    expect(dns).toEqual([
      {
        to: [...excepted.map((cidr) => ({ ipBlock: { cidr } })), { namespaceSelector: {} }],
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
        ],
      },
    ]);
    expect(excepted).toEqual([
      '169.254.0.0/16',
      '100.100.100.200/32',
      '168.63.129.16/32',
      'fe80::/10',
      'fd00:ec2::254/128',
      'fd20:ce::254/128',
    ]);
    // No rule without peers: some policy engines read it as 0.0.0.0/0 and ::/0 (above).
    for (const rule of rules) expect(rule.to?.length ?? 0).toBeGreaterThan(0);
  });

  it('asks DNS of pods in the rule that opens them on every port, when private destinations open them', async () => {
    // The same pods as peers twice, once on port 53 alone, is what the AWS controller merged
    // into port 53 alone (amazon-network-policy-controller-k8s#98).
    const policy = (await egressPolicy('--set', 'egressProxy.enabled=true', '--set', 'egressProxy.hostAliases.nexus\\.corp=10.20.30.40'))!;
    const excepted = ipBlocks(policy).flatMap((peer) => peer.ipBlock!.except!);
    const rules = policy.spec!.egress!;
    expect(rules.filter((rule) => rule.ports).map((rule) => rule.to)).toEqual([excepted.map((cidr) => ({ ipBlock: { cidr } }))]);
    expect(
      rules
        .filter((rule) => !rule.ports)
        .flatMap((rule) => rule.to!)
        .filter((peer) => peer.namespaceSelector),
    ).toEqual([{ namespaceSelector: {} }]);
  });

  it('opens pods of the cluster only when the admin opens private destinations, which may be in-cluster Services', async () => {
    // The DNS rule's pod peers are port 53 alone (above); these are the all-port ones.
    const podPeers = (policy: Manifest) =>
      policy.spec!.egress!.flatMap((rule) => (rule.ports ? [] : (rule.to ?? []))).filter((peer) => peer.namespaceSelector);
    expect(podPeers((await egressPolicy('--set', 'egressProxy.enabled=true'))!)).toEqual([]);
    const opened = await egressPolicy(
      '--set',
      'egressProxy.enabled=true',
      '--set',
      'egressProxy.allowPrivateDestinations={nexus.tools.svc.cluster.local:8081}',
    );
    expect(podPeers(opened!)).toEqual([{ namespaceSelector: {} }]);
    const aliased = await egressPolicy('--set', 'egressProxy.enabled=true', '--set', 'egressProxy.hostAliases.nexus\\.corp=10.20.30.40');
    expect(podPeers(aliased!)).toEqual([{ namespaceSelector: {} }]);
  });

  it('is not rendered without the proxy', async () => {
    expect(await egressPolicy()).toBeUndefined();
  });
});
