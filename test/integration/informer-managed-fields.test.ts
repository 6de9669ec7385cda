// The operator's caches keep no managedFields (controller/informer.ts): checked against the
// real API server, which sends them in every list and watch answer. Runs written by two
// clients (the create, then a status write) carry two entries on the server and none in the
// cache, which keeps the rest of each run as the server sent it.
import { CustomObjectsApi, KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, PLURAL, type CodingRun } from '../../operator/src/api/index.ts';
import { customObjectSource } from '../../operator/src/controller/custom-object-source.ts';
import { Informer } from '../../operator/src/controller/informer.ts';
import { jsonRequests, type JsonRequests } from '../../operator/src/kube/json-requests.ts';
import { createNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';

const NS = 'informer-managed-fields';
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

let informer: Informer<CodingRun> | undefined;
beforeAll(async () => {
  await createNamespace(NS);
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  json = jsonRequests(kubeConfig);
  await createWritten('listed');
}, 60_000);
afterAll(() => informer?.stop());

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
