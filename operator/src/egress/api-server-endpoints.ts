// The API server's endpoints the egress proxy refuses, found once at start: where its
// kubeconfig and KUBERNETES_SERVICE_HOST say it is, and the admin's apiServerAddresses. A name
// among them is resolved then; one that does not resolve stops the proxy from starting. It used
// to be dropped, and the proxy ran without refusing an endpoint the admin had listed.
import { isIP } from 'node:net';

export interface ApiServerEndpoint {
  address: string;
  port: number;
}

/** Where an endpoint was named, for the message, and whether its name is asked for as absolute. */
export interface ApiServerSource {
  what: string;
  host: string;
  port: number;
  /**
   * The admin's names are asked for as given, never through the search list (a relative
   * `api.corp` would be asked as `api.corp.<ns>.svc.cluster.local` first, a Service whoever
   * may create it owns). The kubeconfig's is resolved as the API client resolves it.
   */
  absolute: boolean;
}

export class ApiServerAddressError extends Error {
  override readonly name = 'ApiServerAddressError';
}

/** The sources in the order they are checked: kubeconfig, service environment, then the admin's list. */
export function apiServerSources(
  kubeconfigServer: string | undefined,
  env: NodeJS.ProcessEnv,
  configured: readonly string[],
): ApiServerSource[] {
  const sources: ApiServerSource[] = [];
  if (kubeconfigServer) {
    const url = new URL(kubeconfigServer);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    sources.push({ what: 'the kubeconfig server', host: url.hostname, port, absolute: false });
  }
  if (env.KUBERNETES_SERVICE_HOST) {
    sources.push({
      what: 'KUBERNETES_SERVICE_HOST',
      host: env.KUBERNETES_SERVICE_HOST,
      port: Number(env.KUBERNETES_SERVICE_PORT ?? 443),
      absolute: false,
    });
  }
  configured.forEach((entry, index) => {
    const colon = entry.lastIndexOf(':');
    sources.push({
      what: `apiServerAddresses[${index}]`,
      host: entry.slice(0, colon),
      port: Number(entry.slice(colon + 1)),
      absolute: true,
    });
  });
  return sources;
}

/** Every address of every source; an ApiServerAddressError naming the source when a name does not resolve. */
export async function resolveApiServerEndpoints(
  sources: readonly ApiServerSource[],
  lookupAll: (name: string) => Promise<string[]>,
): Promise<ApiServerEndpoint[]> {
  const endpoints: ApiServerEndpoint[] = [];
  for (const source of sources) {
    const bare = source.host.replace(/^\[|\]$/g, '');
    let addresses: string[];
    if (isIP(bare)) addresses = [bare];
    else {
      try {
        addresses = await lookupAll(source.absolute && !bare.endsWith('.') ? `${bare}.` : bare);
      } catch (error) {
        throw new ApiServerAddressError(unresolved(source, (error as { code?: string }).code ?? String(error)));
      }
      if (addresses.length === 0) throw new ApiServerAddressError(unresolved(source, 'no address'));
    }
    for (const address of addresses) endpoints.push({ address, port: source.port });
  }
  return endpoints;
}

function unresolved(source: ApiServerSource, why: string): string {
  return (
    `${source.what}: ${source.host} did not resolve (${why}), so the proxy could not refuse that API server's address; ` +
    'fix the name (or its DNS), or list the API server by IP address'
  );
}
