// Issue #12 on a real kubelet + containerd node with kube-router enforcing NetworkPolicy, for a
// proxy outside the cluster (config egressProxy.ipBlock): a sandbox pod built by the operator's
// own functions for a run with spec.sandbox.egress, and the namespace's two sandbox
// NetworkPolicies (the deny-all, and the egress policy that allows the proxy's address alone). The proxy runs as a process on the node's bridge address, in front of
// a registry stand-in on the same address. Through the proxy, with the credential the pod's
// environment carries, the registry answers; straight to the registry, the connection fails,
// and without the policies the same direct connection succeeds (the control case). The proxy as
// the chart runs it, in the cluster behind its Service, is test/real-node/helm-install.test.ts.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { stringify } from 'yaml';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { sandboxPoliciesFor } from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlOk } from '../support/cluster.ts';
import { EgressProxyProcess, TEST_EGRESS_KEY } from '../support/egress-proxy-process.ts';
import { connectFrom, getFrom, neighboursOf, until, type SandboxPod } from '../support/real-node/egress-probes.ts';
import { realNodeBridgeAddress, realNodeLabel, realNodeLogLines, realNodeTaint } from '../support/real-node/real-node.ts';
import { runProcess } from '../support/run-process.ts';

const unavailable = inject('realNodeUnavailable');
const namespace = `egress-real-${process.pid}`;

function unowned<T extends { metadata?: { ownerReferences?: unknown } }>(object: T): T {
  delete object.metadata!.ownerReferences;
  return object;
}

/** What the pod, the policy and the proxy looked like, for a failure message: which leg failed. */
async function diagnosis(pod: SandboxPod, proxy: EgressProxyProcess, bridgeIp: string): Promise<string> {
  const rules = await runProcess('iptables-save', ['-t', 'filter'], { timeoutMs: 10_000 }).catch((error: unknown) => ({
    stdout: String(error),
  }));
  const kubeRouterRules = rules.stdout
    .split('\n')
    .filter((line) => /KUBE-ROUTER|KUBE-POD-FW|KUBE-NWPLCY/.test(line))
    .join('\n');
  // The sets the policy's rules match on, with their members: a rule in place over a set that
  // lacks the pod's or the proxy's address looks right in the rules alone (one CI run timed out so).
  const sets = [...new Set([...kubeRouterRules.matchAll(/--match-set (\S+)/g)].map((match) => match[1]!))];
  const members = await Promise.all(
    sets.map(async (set) => {
      const listed = await runProcess('ipset', ['list', set], { timeoutMs: 10_000 }).catch((error: unknown) => ({ stdout: String(error) }));
      return `${set}: ${listed.stdout.split('Members:')[1]?.trim().replace(/\n/g, ', ') ?? listed.stdout.trim()}`;
    }),
  );
  return [
    `a bare TCP connection from the pod to the proxy at ${bridgeIp}:${proxy.port}: ${await connectFrom(pod, bridgeIp, proxy.port)}`,
    `the pod's IP: ${(await kubectl(['get', 'pod', '-n', pod.namespace, pod.name, '-o', 'jsonpath={.status.podIP}'])).stdout}`,
    `kube-router's sets: ${members.join('; ')}`,
    `the proxy's log: ${JSON.stringify(proxy.lines.slice(-10))} ${proxy.stderr.join('').slice(-2000)}`,
    // A bridge that changed its hardware address leaves the pod's ARP entry for the gateway stale.
    `the bridge's address: ${JSON.stringify(realNodeBridgeAddress() ?? 'no bridge')}`,
    `the pod's neighbours: ${await neighboursOf(pod)}`,
    `kube-router's rules: ${kubeRouterRules}`,
    // A sync that fails leaves the rules of the one before until the next event or period.
    `kube-router's last syncs: ${realNodeLogLines('kube-router', /sync|Aborting|rror/).join('\n')}`,
  ].join('\n');
}

describe.skipIf(unavailable !== '')(`egress through the proxy on a real node${unavailable ? ` (SKIPPED: ${unavailable})` : ''}`, () => {
  const bridgeIp = inject('realNodeBridgeIp');
  let registry: Server;
  let registryPort = 0;
  let proxy: EgressProxyProcess;
  const pod: SandboxPod = { namespace, name: '' };
  let policyNames: string[] = [];

  beforeAll(async () => {
    await createNamespace(namespace, { restricted: true });
    registry = createServer((req, res) => res.end(`registry ok ${req.url}`));
    await new Promise<void>((resolve, reject) => {
      registry.once('error', reject);
      // The bridge address (the node makes the bridge before any pod): the host as a pod sees it.
      registry.listen(0, bridgeIp, () => resolve());
    });
    registryPort = (registry.address() as { port: number }).port;
    const allow = [`registry.test:${registryPort}`];
    const manifest = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'egress', namespace },
      spec: {
        task: 'probe',
        repository: { url: 'https://github.com/acme/x' },
        model: { provider: 'scripted', scriptRef: { name: 's' } },
        budget: { timeout: '10m' },
        sandbox: {
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi', 'ephemeral-storage': '1Gi' } },
          egress: { allow },
        },
      },
    };
    // A real run object: the proxy serves only runs it sees live through its watch.
    await kubectlOk(['apply', '-f', '-'], { input: stringify(manifest) });
    const uid = (await kubectlOk(['get', 'codingrun', 'egress', '-n', namespace, '-o', 'jsonpath={.metadata.uid}'])).trim();
    proxy = await EgressProxyProcess.start(kubeconfigPath(), {
      allowEgress: allow,
      allowPrivateDestinations: allow,
      hostAliases: { 'registry.test': bridgeIp },
      watchNamespaces: [namespace],
    });
    const config = loadOperatorConfig(
      {
        sandboxImage: inject('realNodeSandboxImage'),
        sandboxPlacement: {
          nodeSelector: { [realNodeLabel.key]: realNodeLabel.value },
          tolerations: [{ key: realNodeTaint.key, operator: 'Equal', value: realNodeTaint.value, effect: realNodeTaint.effect }],
        },
        allowEgress: allow,
        egressKey: TEST_EGRESS_KEY,
        egressProxy: { address: bridgeIp, port: proxy.port, ipBlock: `${bridgeIp}/32` },
      },
      {},
    );
    const run: ParsedCodingRun = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'egress', namespace, uid },
      spec: codingRunSpec.parse(manifest.spec),
    };
    const sandbox = unowned(buildSandboxPod(run, config));
    pod.name = sandbox.metadata!.name!;
    // The namespace's two sandbox policies, as the operator makes them for this run: the
    // deny-all and the egress policy (the pod carries the label it selects).
    const policies = sandboxPoliciesFor(run, config);
    policyNames = policies.map((policy) => policy.metadata!.name!);
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(sandbox) });
    const ready = await kubectl(['wait', '-n', namespace, `pod/${pod.name}`, '--for=condition=Ready', '--timeout=120s'], {
      timeoutMs: 130_000,
    });
    if (ready.code !== 0)
      throw new Error(`pod not Ready: ${ready.stderr}\n${(await kubectl(['describe', 'pod', '-n', namespace, pod.name])).stdout}`);
    // Control case: no policy yet, the registry answers a direct connection.
    expect(
      await until(
        () => connectFrom(pod, bridgeIp, registryPort),
        (o) => o === 'connected',
      ),
    ).toBe('connected');
    for (const policy of policies) await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(policy) });
  }, 300_000);

  afterAll(async () => {
    await proxy?.kill();
    registry?.close();
    await deleteNamespace(namespace);
  });

  it('cannot reach the registry directly once the policies apply', async () => {
    const outcome = await until(
      () => connectFrom(pod, bridgeIp, registryPort),
      (o) => o !== 'connected',
    );
    expect(outcome, outcome !== 'connected' ? '' : await diagnosis(pod, proxy, bridgeIp)).not.toBe('connected');
  });

  it("reaches it through the proxy, by the proxy URL and credential of the pod's own environment", async () => {
    const outcome = await until(
      () => getFrom(pod, `http://registry.test:${registryPort}/left-pad`),
      (o) => o.startsWith('200'),
    );
    expect(outcome, outcome.startsWith('200') ? '' : await diagnosis(pod, proxy, bridgeIp)).toBe('200 registry ok /left-pad');
  });

  it("is refused by the proxy for a host not on the run's list", async () => {
    const outcome = await getFrom(pod, `http://other.test:${registryPort}/`);
    expect(outcome, outcome.startsWith('403') ? '' : await diagnosis(pod, proxy, bridgeIp)).toMatch(/^403 .*rule not-on-run-list/);
  });

  it('and the policies, not something else, blocked the direct connection', async () => {
    await kubectlOk(['delete', 'networkpolicy', '-n', namespace, ...policyNames]);
    const outcome = await until(
      () => connectFrom(pod, bridgeIp, registryPort),
      (o) => o === 'connected',
    );
    expect(outcome, outcome === 'connected' ? '' : await diagnosis(pod, proxy, bridgeIp)).toBe('connected');
  });
});
