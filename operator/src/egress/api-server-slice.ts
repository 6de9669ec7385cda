// The API server's own endpoints as it publishes them, kept current by a watch: the
// EndpointSlice `kubernetes` in namespace `default`, which the API server writes of itself. The
// kubeconfig and KUBERNETES_SERVICE_HOST name only the Service's ClusterIP
// (api-server-endpoints.ts); the addresses behind it (a control-plane node on 6443, a cloud's
// private endpoint on 443) were refused only if the admin listed them in apiServerAddresses.
// A name an admin opens in allowPrivateDestinations can resolve to one: a name under
// svc.cluster.local is any tenant's to point anywhere with an ExternalName Service. Watched,
// not read once, since the control plane's addresses move (an upgrade, a replaced node).
import type { DiscoveryV1Api, V1EndpointSlice } from '@kubernetes/client-node';
import { isListRefused } from '../controller/list-refused.ts';
import {
  clientNodePage,
  type InformerHandlers,
  type InformerSource,
  type ListAnswer,
  type ListingProgress,
} from '../controller/informer.ts';
import type { ApiServerEndpoint } from './api-server-endpoints.ts';

/** The slice the API server keeps of its own endpoints (the `kubernetes` Service's). */
export const API_SERVER_SLICE = { namespace: 'default', name: 'kubernetes' } as const;

/**
 * Every address of the slice on every port it names, ready or not: an endpoint not ready is
 * still the API server. A port the slice leaves unset ("every port") names none here; the
 * API server's own slice always sets it.
 */
export function sliceEndpoints(slice: V1EndpointSlice): ApiServerEndpoint[] {
  const ports = (slice.ports ?? []).flatMap((port) => (port.port === undefined ? [] : [port.port]));
  return (slice.endpoints ?? []).flatMap((endpoint) => endpoint.addresses.flatMap((address) => ports.map((port) => ({ address, port }))));
}

/** The endpoints the proxy refuses: those found at start, and those the slice publishes now. */
export class ApiServerEndpoints {
  private current: readonly ApiServerEndpoint[];

  constructor(private readonly found: readonly ApiServerEndpoint[]) {
    this.current = found;
  }

  /** Read at every decision (decide-connection.ts decideAddresses). */
  get all(): readonly ApiServerEndpoint[] {
    return this.current;
  }

  /** What the slice publishes now replaces what it published before; what was found at start stays. */
  publish(published: readonly ApiServerEndpoint[]): void {
    this.current = [...this.found, ...published];
  }
}

/** Where the proxy lists and watches that one slice (RBAC: get, list, watch on it by name, in `default`). */
export function apiServerSliceSource(discovery: Pick<DiscoveryV1Api, 'listNamespacedEndpointSlice'>): InformerSource<V1EndpointSlice> {
  const fieldSelector = `metadata.name=${API_SERVER_SLICE.name}`;
  return {
    path: `/apis/discovery.k8s.io/v1/namespaces/${API_SERVER_SLICE.namespace}/endpointslices`,
    fieldSelector,
    list: (page) =>
      discovery.listNamespacedEndpointSlice({
        namespace: API_SERVER_SLICE.namespace,
        fieldSelector,
        ...clientNodePage(page),
      }) as Promise<ListAnswer<V1EndpointSlice>>,
  };
}

export function apiServerSliceWatch(endpoints: ApiServerEndpoints): InformerHandlers<V1EndpointSlice> {
  return {
    onChange: (slice) => endpoints.publish(sliceEndpoints(slice)),
    onDelete: () => endpoints.publish([]),
  };
}

interface SliceInformer {
  reportListing(progress: ListingProgress): void;
  start(): Promise<void>;
}

interface SliceLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** What the proxy's start waits for (`started`) and its shutdown ends (`stop`). */
export interface ApiServerSliceReading {
  started: Promise<void>;
  stop(): void;
}

/** Said once at start when the proxy is told not to read the slice. */
export const SLICE_NOT_READ_MESSAGE =
  "not reading the API server's EndpointSlice (readApiServerEndpoints is false): the proxy refuses as the API server only " +
  'the addresses of its kubeconfig, KUBERNETES_SERVICE_HOST and apiServerAddresses (`refused`). The other addresses the API ' +
  'server answers on are not refused by address: NetworkPolicy keeps sandboxes from reaching them directly, but through the ' +
  'proxy a private one is refused only as any private address is (not for a name in allowPrivateDestinations) and a public ' +
  'one not at all; list them in apiServerAddresses';

const endpointText = ({ address, port }: ApiServerEndpoint) => (address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`);

/**
 * Reads the slice when the proxy's config says to (`readApiServerEndpoints`, which the chart
 * sets false when it grants no Role in `default`). Told not to, it makes no informer: one would
 * ask the API server for a list it refuses, every 30 s for as long as the proxy runs, and warn
 * at every start of what the admin chose. It says once instead, as information, which API server
 * addresses the proxy refuses (`known`, found at start) and that it refuses no others by address.
 */
export function readApiServerSlice(
  read: boolean,
  informer: () => SliceInformer & { stop(): void },
  known: readonly ApiServerEndpoint[],
  logger: SliceLogger,
): ApiServerSliceReading {
  if (!read) {
    logger.info(
      { slice: `${API_SERVER_SLICE.namespace}/${API_SERVER_SLICE.name}`, refused: known.map(endpointText) },
      SLICE_NOT_READ_MESSAGE,
    );
    return { started: Promise.resolve(), stop: () => undefined };
  }
  const watching = informer();
  return { started: startApiServerSliceWatch(watching, logger), stop: () => watching.stop() };
}

/**
 * Starts the watch and resolves once the slice is read, so that the proxy serves nobody before
 * it refuses those addresses. When reading it is refused for good (403: the proxy's
 * ServiceAccount may not, as with RBAC of one's own; 404: no discovery.k8s.io/v1) it resolves
 * too, with a warning: the proxy refuses what it found at start, as before the slice was read,
 * and the watch keeps trying, at most every 30 s (informer.ts REFUSED_RETRY_MAX_MS), silently.
 * Other failures (an API server starting) are waited out, logged.
 */
export function startApiServerSliceWatch(informer: SliceInformer, logger: { warn(fields: object, message: string): void }): Promise<void> {
  return new Promise((resolve) => {
    let warned = false;
    informer.reportListing({
      listFailed: (error) => {
        const refused = isListRefused(error);
        if (refused && warned) return;
        warned ||= refused;
        logger.warn(
          { slice: `${API_SERVER_SLICE.namespace}/${API_SERVER_SLICE.name}`, err: String(error) },
          refused
            ? "could not read the API server's EndpointSlice: the proxy refuses only the API server addresses of its kubeconfig, " +
                'KUBERNETES_SERVICE_HOST and apiServerAddresses; grant it get, list and watch on that EndpointSlice, or list its addresses in apiServerAddresses ' +
                '(and set readApiServerEndpoints false, so that it stops asking)'
            : "could not read the API server's EndpointSlice yet; retrying",
        );
        if (refused) resolve();
      },
      listed: () => resolve(),
    });
    void informer.start();
  });
}
