// The egress proxy refuses the API server's own addresses as it publishes them in the
// EndpointSlice default/kubernetes (egress/api-server-slice.ts), not only the Service address
// its kubeconfig names: a name an admin opens to private addresses (one under svc.cluster.local,
// which any tenant points anywhere with an ExternalName Service) may resolve to one of them.
import type { DiscoveryV1Api, V1EndpointSlice, Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Informer, type ListingProgress } from '../../operator/src/controller/informer.ts';
import {
  ApiServerEndpoints,
  apiServerSliceSource,
  apiServerSliceWatch,
  sliceEndpoints,
  startApiServerSliceWatch,
} from '../../operator/src/egress/api-server-slice.ts';
import { EGRESS_RULES, decideAddresses } from '../../operator/src/egress/decide-connection.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';

/** The slice a control plane of two nodes publishes, one of them not ready. */
const slice: V1EndpointSlice = {
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: 'kubernetes', namespace: 'default', resourceVersion: '5' },
  addressType: 'IPv4',
  endpoints: [
    { addresses: ['10.0.0.5'], conditions: { ready: true } },
    { addresses: ['10.0.0.6'], conditions: { ready: false } },
  ],
  ports: [{ name: 'https', port: 6443, protocol: 'TCP' }],
};

const SERVICE = { address: '10.96.0.1', port: 443 };

describe('sliceEndpoints', () => {
  it('gives every address of the slice on its port, ready or not', () => {
    expect(sliceEndpoints(slice)).toEqual([
      { address: '10.0.0.5', port: 6443 },
      { address: '10.0.0.6', port: 6443 },
    ]);
  });

  it('gives nothing for a slice without endpoints or without a port', () => {
    expect(sliceEndpoints({ ...slice, endpoints: [] })).toEqual([]);
    expect(sliceEndpoints({ ...slice, ports: [{ name: 'https' }] })).toEqual([]);
  });
});

describe('what the proxy refuses as the API server', () => {
  // An admin opened the cluster's Service names to private addresses (an internal registry).
  const policyOf = (endpoints: ApiServerEndpoints) => ({
    allowEgress: parseHostPatterns(['*:6443']),
    allowPrivateDestinations: parseHostPatterns(['*.svc.cluster.local:6443']),
    get apiServer() {
      return endpoints.all;
    },
  });
  const externalName = 'api.team-a.svc.cluster.local';

  it("refuses a name opened to private addresses that resolves to one of the slice's addresses, once the slice is read", () => {
    const endpoints = new ApiServerEndpoints([SERVICE]);
    const policy = policyOf(endpoints);
    // What the kubeconfig alone gave: the endpoint behind the Service was a private address like any other.
    expect(decideAddresses(externalName, 6443, ['10.0.0.5'], policy).allowed).toBe(true);
    apiServerSliceWatch(endpoints).onChange(slice, undefined);
    expect(decideAddresses(externalName, 6443, ['10.0.0.6'], policy)).toMatchObject({ allowed: false, rule: EGRESS_RULES.ApiServer });
    expect(decideAddresses(externalName, 443, [SERVICE.address], policyOf(endpoints))).toMatchObject({ rule: EGRESS_RULES.ApiServer });
  });

  it('follows the slice as it changes, and keeps the endpoints found at start when it is deleted', () => {
    const endpoints = new ApiServerEndpoints([SERVICE]);
    const watch = apiServerSliceWatch(endpoints);
    watch.onChange(slice, undefined);
    const moved = { ...slice, endpoints: [{ addresses: ['10.0.0.7'] }] };
    watch.onChange(moved, slice);
    expect(endpoints.all).toEqual([SERVICE, { address: '10.0.0.7', port: 6443 }]);
    watch.onDelete(moved);
    expect(endpoints.all).toEqual([SERVICE]);
  });
});

describe("the proxy's watch of the slice", () => {
  it('lists and watches the one slice named kubernetes in default, and publishes its endpoints', async () => {
    const asked: object[] = [];
    const discovery = {
      listNamespacedEndpointSlice: async (request: object) => {
        asked.push(request);
        return { items: [slice], metadata: { resourceVersion: '5' } };
      },
    } as unknown as DiscoveryV1Api;
    const watched: Array<{ path: string; query: Record<string, unknown> }> = [];
    const watch = {
      watch: async (path: string, query: Record<string, unknown>, _onEvent: unknown, onDone: (error: unknown) => void) => {
        watched.push({ path, query });
        const controller = new AbortController();
        controller.signal.addEventListener('abort', () => onDone(undefined));
        return controller;
      },
    } as unknown as Watch;
    const endpoints = new ApiServerEndpoints([]);
    const informer = new Informer<V1EndpointSlice>(watch, apiServerSliceSource(discovery), apiServerSliceWatch(endpoints), {
      warn: () => undefined,
    });
    await startApiServerSliceWatch(informer, { warn: () => undefined });
    await expect.poll(() => watched.length).toBe(1);
    informer.stop();
    expect(asked[0]).toMatchObject({ namespace: 'default', fieldSelector: 'metadata.name=kubernetes' });
    expect(watched[0]).toMatchObject({
      path: '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
      query: { fieldSelector: 'metadata.name=kubernetes' },
    });
    expect(endpoints.all).toEqual(sliceEndpoints(slice));
  });
});

describe('startApiServerSliceWatch', () => {
  /** An informer whose first list the test fails or completes. */
  function fakeInformer() {
    let progress: ListingProgress | undefined;
    let started = false;
    return {
      reportListing: (reported: ListingProgress) => void (progress = reported),
      start: () => {
        started = true;
        return new Promise<void>(() => undefined);
      },
      get progress() {
        return progress!;
      },
      get started() {
        return started;
      },
    };
  }
  const settled = async (promise: Promise<void>) => {
    let done = false;
    void promise.then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    return done;
  };
  const statusError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

  it('waits while the API server fails for a while, and goes on once the slice is read', async () => {
    const informer = fakeInformer();
    const warnings: string[] = [];
    const started = startApiServerSliceWatch(informer, { warn: (_fields, message) => void warnings.push(message) });
    expect(informer.started).toBe(true);
    informer.progress.listFailed(statusError(503));
    expect(await settled(started)).toBe(false);
    expect(warnings).toEqual([expect.stringContaining('retrying')]);
    informer.progress.listed();
    expect(await settled(started)).toBe(true);
  });

  it('goes on with a warning that says what to grant when reading the slice is refused (403), once', async () => {
    const informer = fakeInformer();
    const warnings: string[] = [];
    const started = startApiServerSliceWatch(informer, { warn: (_fields, message) => void warnings.push(message) });
    informer.progress.listFailed(statusError(403));
    expect(await settled(started)).toBe(true);
    informer.progress.listFailed(statusError(403));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/grant it get, list and watch on that EndpointSlice, or list its addresses in apiServerAddresses/);
  });
});
