// CodingRuns are listed a few at a time: a page is held whole (its text and every object parsed
// from it) before a cache slims it, and a run may be ~1.5 MiB. The egress proxy (256 Mi) asks
// for at most 16 a page, the operator (768 Mi) for 100, where its other lists keep 500. The API
// server is a local one that serves `RUNS` runs in pages of the `limit` asked and records it.
import { CustomObjectsApi, Watch } from '@kubernetes/client-node';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { LIST_PAGE_LIMIT } from '../../operator/src/controller/informer.ts';
import { RunController } from '../../operator/src/controller/run-controller.ts';
import { egressRunInformers } from '../../operator/src/egress/egress-run-informers.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';

const RUNS = 25;
const run = (index: number) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: `run-${index}`, namespace: 'team', uid: `uid-${index}`, resourceVersion: String(100 + index) },
  spec: {},
});

interface ListAsked {
  resource: string;
  limit: number;
}

/** Lists of codingruns: RUNS of them, paged by the `limit` asked (the token is the next index); other lists empty. Watches end at once. */
async function pagingApiServer() {
  const asked: ListAsked[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://x');
    response.writeHead(200, { 'content-type': 'application/json' });
    if (url.searchParams.get('watch') === 'true') return response.end();
    const resource = url.pathname.split('/').at(-1)!;
    const limit = Number(url.searchParams.get('limit'));
    asked.push({ resource, limit });
    const total = resource === 'codingruns' ? RUNS : 0;
    const start = Number(url.searchParams.get('continue') ?? 0);
    const end = Math.min(total, start + (limit || total));
    const items = Array.from({ length: end - start }, (_, offset) => run(start + offset));
    const token = end < total ? { continue: String(end) } : {};
    response.end(JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '999', ...token }, items }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { kubeConfig: loopbackKubeConfig((server.address() as AddressInfo).port, { token: 't' }), asked };
}

const servers: Array<ReturnType<typeof createServer>> = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const quiet = { info: () => {}, warn: () => {}, error: () => {} };
const limitsOf = (asked: ListAsked[], resource: string) => [
  ...new Set(asked.filter((each) => each.resource === resource).map((each) => each.limit)),
];

describe('lists of CodingRuns come a few runs a page', () => {
  it('the egress proxy asks for at most 16 runs a page, and still caches every run', async () => {
    const api = await pagingApiServer();
    const seen: string[] = [];
    const informers = egressRunInformers(
      new Watch(api.kubeConfig),
      api.kubeConfig.makeApiClient(CustomObjectsApi),
      [],
      { onChange: (each: CodingRun) => seen.push(each.metadata.name), onDelete: () => {} },
      quiet,
    );
    await Promise.all(informers.map((informer) => informer.start()));
    for (const informer of informers) informer.stop();

    const limits = limitsOf(api.asked, 'codingruns');
    expect(limits).toHaveLength(1);
    expect(limits[0]).toBeGreaterThan(0);
    expect(limits[0]).toBeLessThanOrEqual(16);
    // More than one page: the continue token is followed to the end.
    expect(api.asked.filter((each) => each.resource === 'codingruns').length).toBe(Math.ceil(RUNS / limits[0]!));
    expect(new Set(seen).size).toBe(RUNS);
  });

  it('the egress proxy lists each watched namespace a few runs a page', async () => {
    const api = await pagingApiServer();
    const informers = egressRunInformers(
      new Watch(api.kubeConfig),
      api.kubeConfig.makeApiClient(CustomObjectsApi),
      ['team', 'other'],
      { onChange: () => {}, onDelete: () => {} },
      quiet,
    );
    await Promise.all(informers.map((informer) => informer.start()));
    for (const informer of informers) informer.stop();

    expect(informers.map((informer) => informer.path)).toEqual([
      '/apis/chamvi.dev/v1alpha1/namespaces/team/codingruns',
      '/apis/chamvi.dev/v1alpha1/namespaces/other/codingruns',
    ]);
    expect(Math.max(...limitsOf(api.asked, 'codingruns'))).toBeLessThanOrEqual(16);
  });

  it('the operator asks for 100 runs a page, and for its pods as many as before', async () => {
    const api = await pagingApiServer();
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], networkPolicy: false }, {});
    const controller = new RunController(
      api.kubeConfig,
      config,
      { kube: {} as KubeGateway, agent: {} as RunAgent, events: {} as EventRecorder },
      quiet,
    );
    const starting = controller.start();
    while (!api.asked.some((each) => each.resource === 'pods') || api.asked.filter((each) => each.resource === 'codingruns').length < 1) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    controller.stop();
    await starting.catch(() => undefined);

    const limits = limitsOf(api.asked, 'codingruns');
    expect(limits).toHaveLength(1);
    expect(limits[0]).toBeLessThanOrEqual(100);
    // A page of the biggest runs stays well under the operator's 768 Mi limit.
    expect(limits[0]! * 1.5).toBeLessThan(768 / 4);
    expect(limitsOf(api.asked, 'pods')).toEqual([LIST_PAGE_LIMIT]);
  });
});
