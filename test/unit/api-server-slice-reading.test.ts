// Whether the egress proxy reads the API server's EndpointSlice default/kubernetes
// (api-server-slice.ts readApiServerSlice). Told not to (readApiServerEndpoints false, where the
// chart grants it no Role in `default`), it asks the API server nothing and says once, at start,
// which API server addresses it does refuse. Told to but refused (403), it still starts, warns
// once, and asks again no faster than every 30 s for as long as it runs, as it always did.
import type { DiscoveryV1Api, V1EndpointSlice, Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Informer, REFUSED_RETRY_MAX_MS } from '../../operator/src/controller/informer.ts';
import {
  ApiServerEndpoints,
  SLICE_NOT_READ_MESSAGE,
  apiServerSliceSource,
  apiServerSliceWatch,
  readApiServerSlice,
} from '../../operator/src/egress/api-server-slice.ts';

/** What the proxy found at start: its Service's ClusterIP, over IPv4 and IPv6. */
const found = [
  { address: '10.96.0.1', port: 443 },
  { address: 'fd00:10:96::1', port: 443 },
];

const slice: V1EndpointSlice = {
  metadata: { name: 'kubernetes', namespace: 'default', resourceVersion: '5' },
  addressType: 'IPv4',
  endpoints: [{ addresses: ['10.0.0.5'] }],
  ports: [{ name: 'https', port: 6443 }],
};

interface Line {
  level: 'info' | 'warn';
  fields: object;
  message: string;
}

function recordingLogger() {
  const lines: Line[] = [];
  return {
    lines,
    info: (fields: object, message: string) => void lines.push({ level: 'info', fields, message }),
    warn: (fields: object, message: string) => void lines.push({ level: 'warn', fields, message }),
  };
}

/** A discovery client whose every list of the slice is answered by `answer`, counted. */
function discovery(answer: () => Promise<unknown>) {
  const asked = { lists: 0 };
  const client = {
    listNamespacedEndpointSlice: () => {
      asked.lists++;
      return answer();
    },
  } as unknown as DiscoveryV1Api;
  return { asked, client };
}

/** A watch that stays open until the informer stops it. */
const idleWatch = {
  watch: async (_path: string, _query: unknown, _onEvent: unknown, onDone: (error: unknown) => void) => {
    const controller = new AbortController();
    controller.signal.addEventListener('abort', () => onDone(undefined));
    return controller;
  },
} as unknown as Watch;

const forbidden = () =>
  Promise.reject(Object.assign(new Error('HTTP-Code: 403 endpointslices.discovery.k8s.io is forbidden'), { code: 403 }));

describe('readApiServerSlice', () => {
  it('told not to read the slice, makes no watch, asks the API server nothing, and says once at start what it refuses', async () => {
    const logger = recordingLogger();
    const { asked, client } = discovery(forbidden);
    const endpoints = new ApiServerEndpoints(found);
    let informers = 0;
    const reading = readApiServerSlice(
      false,
      () => {
        informers++;
        return new Informer<V1EndpointSlice>(idleWatch, apiServerSliceSource(client), apiServerSliceWatch(endpoints), logger);
      },
      found,
      logger,
    );
    await reading.started;
    await new Promise((resolve) => setTimeout(resolve, 20));
    reading.stop();
    expect(informers).toBe(0);
    expect(asked.lists).toBe(0);
    expect(endpoints.all).toEqual(found);
    expect(logger.lines).toEqual([
      {
        level: 'info',
        fields: { slice: 'default/kubernetes', refused: ['10.96.0.1:443', '[fd00:10:96::1]:443'] },
        message: SLICE_NOT_READ_MESSAGE,
      },
    ]);
    expect(SLICE_NOT_READ_MESSAGE).toMatch(/readApiServerEndpoints is false/);
    expect(SLICE_NOT_READ_MESSAGE).toMatch(/not refused by address/);
    expect(SLICE_NOT_READ_MESSAGE).toMatch(/list them in apiServerAddresses/);
  });

  it('told to read it, starts once the slice is read and refuses what it publishes', async () => {
    const logger = recordingLogger();
    const { asked, client } = discovery(() => Promise.resolve({ items: [slice], metadata: { resourceVersion: '5' } }));
    const endpoints = new ApiServerEndpoints(found);
    const reading = readApiServerSlice(
      true,
      () => new Informer<V1EndpointSlice>(idleWatch, apiServerSliceSource(client), apiServerSliceWatch(endpoints), logger),
      found,
      logger,
    );
    await reading.started;
    reading.stop();
    expect(asked.lists).toBe(1);
    expect(endpoints.all).toEqual([...found, { address: '10.0.0.5', port: 6443 }]);
    expect(logger.lines).toEqual([]);
  });

  it('told to read it but refused (403), starts with one warning and asks again no faster than every 30 s, without end', async () => {
    const logger = recordingLogger();
    const { asked, client } = discovery(forbidden);
    const endpoints = new ApiServerEndpoints(found);
    const waits: number[] = [];
    let informer: Informer<V1EndpointSlice> | undefined;
    // The informer's back-off, recorded instead of slept; after 12 tries the proxy shuts down.
    const sleep = (ms: number) => {
      waits.push(ms);
      if (waits.length === 12) informer!.stop();
      return new Promise<void>((resolve) => setImmediate(resolve));
    };
    const reading = readApiServerSlice(
      true,
      () =>
        (informer = new Informer<V1EndpointSlice>(idleWatch, apiServerSliceSource(client), apiServerSliceWatch(endpoints), logger, sleep)),
      found,
      logger,
    );
    await reading.started;
    await expect.poll(() => waits.length).toBe(12);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(asked.lists).toBe(12);
    expect(waits.slice(0, 8)).toEqual([250, 500, 1000, 2000, 4000, 8000, 16000, REFUSED_RETRY_MAX_MS]);
    expect(waits.slice(7)).toEqual(Array(5).fill(REFUSED_RETRY_MAX_MS));
    expect(REFUSED_RETRY_MAX_MS).toBe(30_000);
    expect(logger.lines).toEqual([
      {
        level: 'warn',
        fields: expect.objectContaining({ slice: 'default/kubernetes' }),
        message: expect.stringContaining('grant it get, list and watch'),
      },
    ]);
    expect(logger.lines[0]!.message).toMatch(/set readApiServerEndpoints false/);
    expect(endpoints.all).toEqual(found);
  });
});
