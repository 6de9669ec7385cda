// A kubeconfig for a test's own HTTP server on loopback (a fake API server answering as the real
// one would): plain HTTP, a token user, and the namespace the code under test should default to.
import { KubeConfig } from '@kubernetes/client-node';

export function loopbackKubeConfig(port: number, options: { namespace?: string; token?: string } = {}): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', ...(options.token ? { token: options.token } : {}) }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u', ...(options.namespace ? { namespace: options.namespace } : {}) }],
    currentContext: 'x',
  });
  return kubeConfig;
}
