// CodingRuns are listed a few at a time: a page is held whole (its text and every object parsed
// from it) before a cache slims it, and a run may be ~1.5 MiB. The egress proxy (256 Mi) asks
// for at most 16 a page; the operator's run, eval and schedule informers ask for a page whose
// biggest objects fit a share of the operator's heap limit (the chart's heapLimitMiB), where its
// other lists keep 500. The API server is a local one that serves `RUNS` runs in pages of the
// `limit` asked and records it.
import { CustomObjectsApi, Watch, type KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig, type OperatorConfig } from '../../operator/src/config/operator-config.ts';
import { EvalController } from '../../operator/src/controller/eval-controller.ts';
import { LIST_PAGE_LIMIT } from '../../operator/src/controller/informer.ts';
import { RunController } from '../../operator/src/controller/run-controller.ts';
import { ScheduleController } from '../../operator/src/controller/schedule-controller.ts';
import { egressRunInformers } from '../../operator/src/egress/egress-run-informers.ts';
import type { EvalGateway } from '../../operator/src/kube/eval-gateway.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { ScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';
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
});

/**
 * What a page of the operator's lists may hold at worst, against its heap limit: the chart's
 * heapLimitMiB (the image's --max-old-space-size is the same; test/integration/chart.test.ts).
 * Each object as large as etcd stores (~1.5 MiB), held as the answer's text and the objects
 * parsed from it (about 2x the text for long strings; 3x allowed), in at most a third of the
 * heap: a settled operator uses about 70 MiB of its 160 (operator/Dockerfile).
 */
const LARGEST_OBJECT_MIB = 1.5;
const HELD_PER_TEXT = 3;
const PAGE_SHARE_OF_HEAP = 1 / 3;
const heapLimitMiB = Number(
  (parse(readFileSync(new URL('../../charts/chamvi-operator/values.yaml', import.meta.url), 'utf8')) as { heapLimitMiB: unknown })
    .heapLimitMiB,
);
const worstPageMiB = (limit: number) => limit * LARGEST_OBJECT_MIB * HELD_PER_TEXT;

interface ControllerUnderTest {
  start(): Promise<void>;
  stop(): void;
}

const operatorControllers: Array<{
  name: string;
  /** What it lists of CodingRuns, CodingEvals and CodingSchedules. */
  resources: string[];
  make: (kubeConfig: KubeConfig, config: OperatorConfig) => ControllerUnderTest;
}> = [
  {
    name: 'run controller',
    resources: ['codingruns'],
    make: (kubeConfig, config) =>
      new RunController(kubeConfig, config, { kube: {} as KubeGateway, agent: {} as RunAgent, events: {} as EventRecorder }, quiet),
  },
  {
    name: 'eval controller',
    resources: ['codingruns', 'codingevals'],
    make: (kubeConfig, config) => new EvalController(kubeConfig, config, {} as EvalGateway, quiet),
  },
  {
    name: 'schedule controller',
    resources: ['codingruns', 'codingschedules'],
    make: (kubeConfig, config) =>
      new ScheduleController(kubeConfig, config, { kube: {} as ScheduleGateway, events: { record: async () => undefined } }, quiet),
  },
];

describe.each(operatorControllers)("the operator's $name", ({ resources, make }) => {
  it("asks for its custom resources a page whose biggest objects fit a third of the chart's heap limit", async () => {
    expect(heapLimitMiB).toBeGreaterThan(0);
    const api = await pagingApiServer();
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], networkPolicy: false }, {});
    const controller = make(api.kubeConfig, config);
    const starting = controller.start();
    const asked = (resource: string) => api.asked.some((each) => each.resource === resource);
    while (!resources.every(asked)) await new Promise((resolve) => setTimeout(resolve, 5));
    controller.stop();
    await starting.catch(() => undefined);

    for (const resource of resources) {
      const limits = limitsOf(api.asked, resource);
      expect(limits, resource).toHaveLength(1);
      expect(limits[0], resource).toBeGreaterThan(0);
      expect(worstPageMiB(limits[0]!), `${resource}: ${limits[0]} a page of ${LARGEST_OBJECT_MIB} MiB objects`).toBeLessThanOrEqual(
        heapLimitMiB * PAGE_SHARE_OF_HEAP,
      );
    }
  });
});

describe('the operator lists its other objects', () => {
  it('asks for its pods as many a page as before', async () => {
    const api = await pagingApiServer();
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], networkPolicy: false }, {});
    const controller = new RunController(
      api.kubeConfig,
      config,
      { kube: {} as KubeGateway, agent: {} as RunAgent, events: {} as EventRecorder },
      quiet,
    );
    const starting = controller.start();
    while (!api.asked.some((each) => each.resource === 'pods')) await new Promise((resolve) => setTimeout(resolve, 5));
    controller.stop();
    await starting.catch(() => undefined);

    expect(limitsOf(api.asked, 'pods')).toEqual([LIST_PAGE_LIMIT]);
  });
});
