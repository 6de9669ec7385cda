// The operator's informers (controller/informer.ts) against the real API server:
// - the caches keep no managedFields, which the server sends in every list and watch answer:
//   runs written by two clients (the create, then a status write) carry two entries on the
//   server and none in the cache, which keeps the rest of each run as the server sent it;
// - a list comes in pages, through each kind of source the operator has: custom objects
//   (plain JSON, `continue`), client-node's typed lists (`_continue`) and metadata only.
import { CoreV1Api, CustomObjectsApi, KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, PLURAL, type CodingRun } from '../../operator/src/api/index.ts';
import { customObjectSource } from '../../operator/src/controller/custom-object-source.ts';
import { Informer, type CachedObject, type InformerSource, type ListPage } from '../../operator/src/controller/informer.ts';
import { jsonRequests, type JsonRequests } from '../../operator/src/kube/json-requests.ts';
import { listMetadata, metadataOnlyWatch } from '../../operator/src/kube/metadata-only.ts';
import { createNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { quietWatch } from '../support/quiet-watch.ts';

const NS = 'informer';
const runs = `/apis/${API_VERSION}/namespaces/${NS}/${PLURAL}`;
let kubeConfig: KubeConfig;
let json: JsonRequests;

const run = (name: string) => ({
  apiVersion: API_VERSION,
  kind: 'CodingRun',
  metadata: { name, labels: { team: 'a' } },
  spec: {
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/webapp.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
  },
});

/** The create, then a status write by another field manager: two managedFields entries. */
async function createWritten(name: string): Promise<void> {
  await json.send('POST', `${runs}?fieldManager=the-author`, run(name));
  await json.send(
    'PATCH',
    `${runs}/${name}/status?fieldManager=the-operator`,
    { status: { phase: 'Pending', message: 'waiting' } },
    'application/merge-patch+json',
  );
}

const managedFieldsOf = (object: CodingRun | undefined) =>
  (object?.metadata as { managedFields?: Array<{ manager: string }> } | undefined)?.managedFields;

const informers: Array<Informer<CachedObject>> = [];
let informer: Informer<CodingRun> | undefined;
beforeAll(async () => {
  await createNamespace(NS);
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  json = jsonRequests(kubeConfig);
  await createWritten('listed');
}, 60_000);
afterAll(() => {
  informer?.stop();
  for (const each of informers) each.stop();
});

describe('the operator cache of CodingRuns', () => {
  it('keeps runs from the list and from the watch without the managedFields the server sends', async () => {
    const seen: CodingRun[] = [];
    informer = new Informer<CodingRun>(
      new Watch(kubeConfig),
      customObjectSource<CodingRun>(kubeConfig.makeApiClient(CustomObjectsApi), NS, PLURAL),
      { onChange: (object) => seen.push(object), onDelete: () => undefined },
      { warn: () => undefined },
    );
    await informer.start();
    await createWritten('watched');
    const watched = await eventually(async () => {
      const cached = informer!.get(NS, 'watched');
      return cached?.status?.phase === 'Pending' ? cached : undefined;
    });

    for (const name of ['listed', 'watched']) {
      const server = await json.get<CodingRun>(`${runs}/${name}`);
      // The server has them, so the cache's lack of them is the cache's doing.
      expect(
        managedFieldsOf(server)
          ?.map((entry) => entry.manager)
          .sort(),
      ).toEqual(['the-author', 'the-operator']);
      const cached = informer.get(NS, name);
      expect(managedFieldsOf(cached)).toBeUndefined();
      // Everything else as the server has it.
      const { managedFields: _fields, ...metadata } = server.metadata as CodingRun['metadata'] & { managedFields?: unknown };
      expect(cached).toEqual({ ...server, metadata });
    }
    expect(watched.metadata.labels).toEqual({ team: 'a' });
    expect(seen.length).toBeGreaterThanOrEqual(3);
    for (const object of seen) expect(managedFieldsOf(object)).toBeUndefined();
  });
});

describe('an informer lists in pages', () => {
  const PAGED = 'informer-test=paged';
  const configMaps = `/api/v1/namespaces/${NS}/configmaps`;
  const NAMES = ['p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7'];

  beforeAll(async () => {
    for (const name of NAMES) {
      await json.send('POST', runs, { ...run(name), metadata: { name, labels: { 'informer-test': 'paged' } } });
      await json.send('POST', configMaps, { metadata: { name, labels: { 'informer-test': 'paged' } }, data: { n: name } });
    }
  }, 60_000);

  /** An informer over `source` with pages of 3, the pages it asked for, and its cache's names once a created one arrives. */
  async function pagedThrough<T extends CachedObject>(source: InformerSource<T>, watch: Watch, create: (name: string) => Promise<unknown>) {
    const asked: ListPage[] = [];
    const paged = new Informer<T>(
      watch,
      { ...source, list: (page) => (asked.push(page), source.list(page)) },
      { onChange: () => undefined, onDelete: () => undefined },
      { warn: () => undefined },
      undefined,
      3,
    );
    informers.push(paged as unknown as Informer<CachedObject>);
    await paged.start();
    const listed = paged
      .list()
      .map((each) => each.metadata!.name!)
      .sort();
    // The watch goes on from the pages' snapshot: an object made after it arrives.
    await create('p8');
    await eventually(async () => paged.get(NS, 'p8'), 30_000, 'the object made after the list');
    return { asked, listed };
  }

  const threePages = (asked: ListPage[]) => {
    expect(asked).toHaveLength(3);
    expect(asked.map((page) => page.limit)).toEqual([3, 3, 3]);
    expect(asked[0]!.continue).toBeUndefined();
    expect(asked[1]!.continue).toEqual(expect.any(String));
    expect(asked[2]!.continue).toEqual(expect.any(String));
  };

  it('custom objects: the runs, as the run controller lists them', async () => {
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    const { asked, listed } = await pagedThrough(
      customObjectSource<CodingRun>(custom, NS, PLURAL, 'informer-test'),
      new Watch(kubeConfig),
      (name) => json.send('POST', runs, { ...run(name), metadata: { name, labels: { 'informer-test': 'paged' } } }),
    );
    threePages(asked);
    expect(listed).toEqual(NAMES);
  });

  it("client-node's typed lists, as the pods and policies are listed", async () => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const { asked, listed } = await pagedThrough(
      {
        path: configMaps,
        labelSelector: PAGED,
        list: ({ limit, continue: token }) =>
          core.listNamespacedConfigMap({ namespace: NS, labelSelector: PAGED, limit, ...(token ? { _continue: token } : {}) }),
      },
      new Watch(kubeConfig),
      (name) => core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name, labels: { 'informer-test': 'paged' } } } }),
    );
    threePages(asked);
    expect(listed).toEqual(NAMES);
  });

  it('metadata only, as the ConfigMaps the operator owns are listed', async () => {
    const { asked, listed } = await pagedThrough(
      { path: configMaps, labelSelector: PAGED, list: (page) => listMetadata(json, configMaps, PAGED, page) },
      metadataOnlyWatch(kubeConfig),
      // Made by the test before: p8 exists, so this one only has to be seen.
      async () => undefined,
    );
    // p8 is there already (the test before made it): eight objects, three pages.
    threePages(asked);
    expect(listed).toEqual([...NAMES, 'p8']);
  });
});

describe('a quiet watch', () => {
  it("is resumed at once when client-node's inactivity timer ends it, with no warning and no back-off", async () => {
    const QUIET = 'informer-quiet';
    await createNamespace(QUIET);
    const { watch, timeouts } = quietWatch(kubeConfig);
    const warnings: object[] = [];
    const sleeps: number[] = [];
    const quiet = new Informer<CodingRun>(
      watch,
      customObjectSource<CodingRun>(kubeConfig.makeApiClient(CustomObjectsApi), QUIET, PLURAL),
      { onChange: () => undefined, onDelete: () => undefined },
      { warn: (fields) => warnings.push(fields) },
      async (ms) => void sleeps.push(ms),
    );
    informers.push(quiet as unknown as Informer<CachedObject>);
    await quiet.start();
    await eventually(async () => (timeouts() >= 3 ? true : undefined), 20_000, 'three quiet ends');

    expect(warnings).toEqual([]);
    expect(sleeps).toEqual([]);
    // And the watch after them still brings what is made.
    await json.send('POST', `/apis/${API_VERSION}/namespaces/${QUIET}/${PLURAL}`, run('after-the-quiet'));
    await eventually(async () => quiet.get(QUIET, 'after-the-quiet'), 10_000, 'the run made after the quiet ends');
  });
});
