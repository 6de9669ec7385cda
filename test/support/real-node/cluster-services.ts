// Services and names for pods on the real node, the way a real cluster provides them (see
// docs/real-node.md "Services and DNS"), so a pod that is only given values — the operator
// installed with `helm install` — finds the API server and Redis as it would anywhere:
//
// - kube-proxy (iptables mode), built from the same k8s.io/kubernetes as the kubelet, turns
//   every Service's ClusterIP into DNAT rules to its endpoints: the `kubernetes` Service for
//   the in-cluster config (KUBERNETES_SERVICE_HOST, the pod's ServiceAccount token), the
//   chart's Redis Service, the metrics Service.
// - The `kubernetes` Service's endpoint is the API server's address on the node network. The
//   test control plane's API server listens on loopback only (a shared machine) and publishes
//   no endpoints (--endpoint-reconciler-type=none), so a TCP relay (tcp-relay.ts) puts it on
//   the bridge address and an EndpointSlice names that address: what the API server itself
//   would publish if it listened there.
// - CoreDNS with its kubernetes plugin answers cluster.local names on the bridge address, and
//   the kubelet gives pods that address as their nameserver (clusterDNS), as NodeLocal
//   DNSCache does with a node-local address: the chart's redis://<release>-redis.<ns>.svc URL
//   resolves unchanged.
// - Pods get one route more than before, the Service range through the bridge. The host
//   would forward on, along its own default route, whatever kube-proxy did not translate (an
//   unused ClusterIP, or every ClusterIP while kube-proxy is down), and kube-router's FORWARD
//   rules accept pod traffic before any filter rule of ours: a guard in the mangle table's
//   FORWARD chain (before any filter rule) drops every packet from the pods' range that would
//   leave by an interface other than the bridge. Pods reach this machine and each other, and
//   nothing beyond, whatever else is running.
//
// Everything is recorded in the node's root (pids, logs) and stopped with it: stopRealNode
// stops every recorded process and drops every KUBE- chain, the guard's included.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Resolver } from 'node:dns/promises';
import { join } from 'node:path';
import { runProcess } from '../run-process.ts';
import { freePorts } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { waitUntil } from '../control-plane/readiness.ts';
import { kubectlOrThrow, type RunKubectlOptions } from '../control-plane/run-kubectl.ts';

/** The control plane's --service-cluster-ip-range (control-plane.ts). */
export const serviceCidr = '10.96.0.0/16';
export const clusterDomain = 'cluster.local';
const guardChain = 'KUBE-CHAMVI-POD-EGRESS-GUARD';

/** The binaries the services need, and how to get them. */
export function missingForClusterServices(binDir: string): string[] {
  return ['kube-proxy', 'coredns']
    .filter((name) => !existsSync(join(binDir, name)))
    .map((name) => `${join(binDir, name)} (test/support/real-node/build-cluster-services.sh, or make real-node)`);
}

/** What the kubelet needs to give pods the cluster's DNS (merged into its configuration). */
export function kubeletClusterDns(bridgeIp: string): { clusterDNS: string[]; clusterDomain: string } {
  return { clusterDNS: [bridgeIp], clusterDomain };
}

/** host-local IPAM routes: the Service range through the bridge, where kube-proxy's rules are. */
export function podServiceRoutes(bridgeIp: string): { dst: string; gw: string }[] {
  return [{ dst: serviceCidr, gw: bridgeIp }];
}

export interface ClusterServicesOptions {
  binDir: string;
  kubeconfig: string;
  /** The node's root: logs, pids and config files go there. */
  root: string;
  nodeName: string;
  bridge: string;
  bridgeIp: string;
  podCidr: string;
  log: (message: string) => void;
}

export interface ClusterServices {
  processes: ManagedProcess[];
  startSeconds: number;
}

export async function startClusterServices(options: ClusterServicesOptions): Promise<ClusterServices> {
  const began = Date.now();
  const missing = missingForClusterServices(options.binDir);
  if (missing.length > 0) throw new Error(`missing: ${missing.join('; ')}`);
  const kubectl: RunKubectlOptions = { binDir: options.binDir, kubeconfig: options.kubeconfig };
  const [relayPort, proxyHealthPort, proxyMetricsPort, dnsHealthPort, dnsReadyPort] = await freePorts(5);
  const start = (name: string, command: string, args: string[]): ManagedProcess => {
    options.log(`starting ${name}`);
    return startManagedProcess({ name, stateDir: options.root, command, args });
  };

  // The node made the bridge with its gateway address before any pod (real-node.ts
  // createBridge): the relay and CoreDNS listen on that address from the start.
  await guardPodEgress(options.podCidr, options.bridge);

  const apiServer = new URL(/^\s*server:\s*(\S+)/m.exec(readFileSync(options.kubeconfig, 'utf8'))?.[1] ?? '');
  const relay = start('api-server-relay', process.execPath, [
    join(import.meta.dirname, 'tcp-relay.ts'),
    options.bridgeIp,
    String(relayPort),
    apiServer.hostname,
    apiServer.port,
  ]);
  const processes = [relay];
  await waitUntil('the API server relay', async () => readFileSync(relay.logPath, 'utf8').includes('relaying'), {
    timeoutMs: 15_000,
    watch: processes,
  });
  await kubectlOrThrow(['apply', '-f', '-'], { ...kubectl, input: JSON.stringify(kubernetesEndpointSlice(options.bridgeIp, relayPort!)) });

  const proxyConfig = join(options.root, 'kube-proxy.yaml');
  writeFileSync(proxyConfig, kubeProxyConfig(options, proxyHealthPort!, proxyMetricsPort!));
  processes.push(start('kube-proxy', join(options.binDir, 'kube-proxy'), [`--config=${proxyConfig}`, '--v=1']));
  await waitUntil(
    'kube-proxy /healthz',
    async () => (await fetch(`http://127.0.0.1:${proxyHealthPort}/healthz`).catch(() => undefined))?.ok === true,
    { timeoutMs: 60_000, watch: processes, intervalMs: 500 },
  );
  // Synced: the `kubernetes` Service's ClusterIP has its rule.
  await waitUntil(
    'kube-proxy rules for the kubernetes Service',
    async () =>
      (await runProcess('iptables', ['-t', 'nat', '-S', 'KUBE-SERVICES'], { timeoutMs: 10_000 })).stdout.includes(
        'default/kubernetes:https',
      ),
    { timeoutMs: 60_000, watch: processes, intervalMs: 500 },
  );

  const corefile = join(options.root, 'Corefile');
  writeFileSync(corefile, coreDnsConfig(options, dnsHealthPort!, dnsReadyPort!));
  processes.push(start('coredns', join(options.binDir, 'coredns'), ['-conf', corefile]));
  const resolver = new Resolver({ timeout: 1000, tries: 1 });
  resolver.setServers([options.bridgeIp]);
  await waitUntil(
    'CoreDNS answering kubernetes.default.svc',
    async () => (await resolver.resolve4(`kubernetes.default.svc.${clusterDomain}`)).includes('10.96.0.1'),
    { timeoutMs: 60_000, watch: processes, intervalMs: 500 },
  );

  const startSeconds = Math.round((Date.now() - began) / 100) / 10;
  options.log(`cluster services (kube-proxy, API server endpoint, CoreDNS) up in ${startSeconds}s`);
  return { processes, startSeconds };
}

/**
 * Nothing from the pods' range leaves by another interface than the bridge. mangle FORWARD
 * runs after kube-proxy's DNAT (so translated Service traffic to a pod passes) and before
 * kube-router's filter rules (which accept pod traffic). A KUBE- chain, so the node's stop
 * removes it with kube-proxy's.
 */
async function guardPodEgress(podCidr: string, bridge: string): Promise<void> {
  const iptables = (args: string[]) => runProcess('iptables', ['-t', 'mangle', ...args], { timeoutMs: 10_000 });
  await iptables(['-N', guardChain]);
  await iptables(['-F', guardChain]);
  const added = await iptables(['-A', guardChain, '-s', podCidr, '!', '-o', bridge, '-j', 'DROP']);
  if (added.code !== 0) throw new Error(`iptables -t mangle -A ${guardChain}: ${added.stderr.trim()}`);
  if ((await iptables(['-C', 'FORWARD', '-j', guardChain])).code !== 0) {
    const jump = await iptables(['-I', 'FORWARD', '1', '-j', guardChain]);
    if (jump.code !== 0) throw new Error(`iptables -t mangle -I FORWARD -j ${guardChain}: ${jump.stderr.trim()}`);
  }
}

/** The endpoint the API server publishes for itself when it listens on a routable address. */
function kubernetesEndpointSlice(bridgeIp: string, port: number): object {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'kubernetes',
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': 'kubernetes', 'endpointslice.kubernetes.io/managed-by': 'chamvi.dev-real-node' },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: [bridgeIp], conditions: { ready: true } }],
    ports: [{ name: 'https', port, protocol: 'TCP' }],
  };
}

function kubeProxyConfig(options: ClusterServicesOptions, healthPort: number, metricsPort: number): string {
  return JSON.stringify(
    {
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      clientConnection: { kubeconfig: options.kubeconfig },
      hostnameOverride: options.nodeName,
      mode: 'iptables',
      // Traffic from outside the pods' range is masqueraded; pod to pod keeps its source (the
      // NetworkPolicy enforcer matches on it).
      clusterCIDR: options.podCidr,
      healthzBindAddress: `127.0.0.1:${healthPort}`,
      metricsBindAddress: `127.0.0.1:${metricsPort}`,
      // A shared machine: NodePorts only on the bridge, no route_localnet, and the host's
      // conntrack limits and timeouts left as they are (0: do not set).
      nodePortAddresses: [`${options.bridgeIp}/32`],
      iptables: { localhostNodePorts: false, syncPeriod: '30s', minSyncPeriod: '0s' },
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    },
    null,
    2,
  );
}

function coreDnsConfig(options: ClusterServicesOptions, healthPort: number, readyPort: number): string {
  return `.:53 {
    bind ${options.bridgeIp}
    errors
    health 127.0.0.1:${healthPort}
    ready 127.0.0.1:${readyPort}
    kubernetes ${clusterDomain} in-addr.arpa ip6.arpa {
        kubeconfig ${options.kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    # No forward: pods resolve cluster names only (they reach nothing beyond this machine).
    cache 30
}
`;
}
