// client-node 2 builds a new undici Agent for every API request (KubeConfig's
// applySecurityAuthentication makes one per call), so every call would pay a new TCP and TLS
// handshake (about 10 ms on loopback, more over a network). This keeps the first dispatcher
// made for a cluster and user and hands it to every later request, through the public
// RequestContext get/setDispatcher: the dispatcher only carries the cluster's TLS material
// (CA, client certificate), which does not change while the process runs; tokens travel in
// headers and are still applied per request. WebSockets (exec, watch) already share one
// agent per cluster and user inside client-node 2.
import type { KubeConfig } from '@kubernetes/client-node';

type Authenticate = KubeConfig['applySecurityAuthentication'];
type Dispatcher = NonNullable<ReturnType<Parameters<Authenticate>[0]['getDispatcher']>>;

export function reuseConnections(kubeConfig: KubeConfig): KubeConfig {
  const authenticate = kubeConfig.applySecurityAuthentication.bind(kubeConfig);
  const dispatchers = new Map<string, Dispatcher>();
  kubeConfig.applySecurityAuthentication = async (context) => {
    await authenticate(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return;
    const cluster = kubeConfig.getCurrentCluster();
    const key = JSON.stringify([cluster?.name ?? '', cluster?.server ?? '', kubeConfig.getCurrentUser()?.name ?? '']);
    const kept = dispatchers.get(key);
    if (kept === undefined) {
      dispatchers.set(key, fresh);
      return;
    }
    context.setDispatcher(kept);
    // The fresh one is dropped, not closed: it never opened a connection, so it holds no
    // socket or timer, and the collector takes it (20 000 dropped: heap as with closing).
    // undici's close makes an error object with a stack to destroy it: 1 % of the
    // operator's CPU in a scale run's profile, at every API request.
  };
  return kubeConfig;
}
