// What a run's egress list means for its sandbox pod and its NetworkPolicy. Pure.
//
// A run with egress gets the proxy's address and its own credential (egress/proxy-credential.ts)
// in the environment variables that tools read for a proxy, and its pod is selected by the
// namespace's egress policy (sandbox-network-policy.ts), which lets it reach the proxy and
// nothing else, not even DNS: the proxy resolves names, so the sandbox needs none, and it
// cannot learn addresses to try around the proxy. A run without egress has only the deny-all.
import type { V1EnvVar, V1NetworkPolicyEgressRule } from '@kubernetes/client-node';
import type { ParsedCodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { proxyToken } from '../egress/proxy-credential.ts';

type EgressConfig = Pick<OperatorConfig, 'egressProxy' | 'egressKey'>;

export type EgressReadiness = { ready: true } | { ready: false; message: string };

/** Can the operator give a run egress at all? (Checked at acceptance, before anything is created.) */
export function egressReadiness(config: EgressConfig): EgressReadiness {
  const missing = [
    ...(config.egressKey ? [] : ['egressKey']),
    ...(config.egressProxy.address || config.egressProxy.service || config.egressProxy.host ? [] : ['egressProxy.service']),
  ];
  if (missing.length === 0) return { ready: true };
  return {
    ready: false,
    message:
      `spec.sandbox.egress.allow is set, but the operator has no egress proxy (config ${missing.join(' and ')} unset); ` +
      "ask an admin to enable the chart's egressProxy, or remove spec.sandbox.egress and create the run again",
  };
}

export const wantsEgress = (run: ParsedCodingRun) => run.spec.sandbox.egress.allow.length > 0;

/** Hosts the sandbox reaches without the proxy: only itself. */
export const NO_PROXY = 'localhost,127.0.0.1,::1';

/** Names of the variables egressEnv sets (kwok's stand-in for a kubelet passes exactly these on, see the exec registrar). */
export const EGRESS_ENV_NAMES: readonly string[] = [
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'http_proxy',
  'https_proxy',
  'NO_PROXY',
  'no_proxy',
  'npm_config_proxy',
  'npm_config_https_proxy',
  'PIP_PROXY',
  'GIT_CONFIG_COUNT',
  'GIT_CONFIG_KEY_0',
  'GIT_CONFIG_VALUE_0',
  'NODE_USE_ENV_PROXY',
];

/** The environment of a sandbox with egress; empty without. The credential is the run's own (SECURITY.md). */
export function egressEnv(run: ParsedCodingRun, config: EgressConfig): V1EnvVar[] {
  if (!wantsEgress(run) || !config.egressKey) return [];
  const address = config.egressProxy.address ?? config.egressProxy.host;
  if (!address) return [];
  const host = address.includes(':') ? `[${address}]` : address;
  const url = `http://${run.metadata.uid}:${proxyToken(config.egressKey, run.metadata.uid)}@${host}:${config.egressProxy.port}`;
  const env: Array<[string, string]> = [
    // curl and wget read only the lower-case http_proxy; most others read either.
    ['HTTP_PROXY', url],
    ['HTTPS_PROXY', url],
    ['http_proxy', url],
    ['https_proxy', url],
    ['NO_PROXY', NO_PROXY],
    ['no_proxy', NO_PROXY],
    // Tools that keep their own proxy setting, set through the environment (the root file
    // system is read-only and a config file in home could be edited away by the agent anyway;
    // either way the NetworkPolicy is what holds): npm, pip, git; Node's own fetch and http
    // use the variables above only with NODE_USE_ENV_PROXY. Go reads HTTPS_PROXY itself.
    ['npm_config_proxy', url],
    ['npm_config_https_proxy', url],
    ['PIP_PROXY', url],
    ['GIT_CONFIG_COUNT', '1'],
    ['GIT_CONFIG_KEY_0', 'http.proxy'],
    ['GIT_CONFIG_VALUE_0', url],
    ['NODE_USE_ENV_PROXY', '1'],
  ];
  return env.map(([name, value]) => ({ name, value }));
}

/** The egress policy's rules (sandbox-network-policy.ts): to the proxy only (its pods, or its CIDR when it runs outside the cluster). */
export function egressRules(config: EgressConfig): V1NetworkPolicyEgressRule[] {
  const proxy = config.egressProxy;
  const port = { protocol: 'TCP', port: proxy.ipBlock ? proxy.port : (proxy.targetPort ?? proxy.port) };
  const to = proxy.ipBlock
    ? [{ ipBlock: { cidr: proxy.ipBlock } }]
    : [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': proxy.namespace } },
          podSelector: { matchLabels: proxy.podLabels },
        },
      ];
  return [{ to, ports: [port] }];
}
