// client-node 1.4 builds a new https.Agent for every request, so every API call pays a new
// TCP and TLS handshake (about 10 ms on loopback, more over a network). One keep-alive agent
// per cluster lets calls share connections. The agent only carries the TLS material of the
// cluster (CA, client certificate), which does not change while the process runs; tokens
// travel in headers and are still applied per request.
import type { Agent } from 'node:http';
import type { Cluster, KubeConfig } from '@kubernetes/client-node';

type AgentFactory = (cluster: Cluster | null, options: Record<string, unknown>) => Agent;

export function reuseConnections(kubeConfig: KubeConfig): KubeConfig {
  const target = kubeConfig as unknown as { createAgent: AgentFactory };
  const create = target.createAgent.bind(kubeConfig);
  const agents = new Map<string, Agent>();
  target.createAgent = (cluster, options) => {
    const key = `${cluster?.name ?? ''} ${cluster?.server ?? ''}`;
    let agent = agents.get(key);
    if (!agent) {
      agent = create(cluster, { ...options, keepAlive: true });
      agents.set(key, agent);
    }
    return agent;
  };
  return kubeConfig;
}
