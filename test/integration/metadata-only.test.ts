// The controller's metadata-only reads of its ConfigMaps (operator/src/kube/metadata-only.ts)
// against the real API server: a list and a watch that carry names, labels, owners and
// versions, and none of the data, whatever its size. Also what keeps the wiring honest: if a
// client-node upgrade stopped sending the Accept header, these would see the data again.
import { KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reuseConnections } from '../../operator/src/kube/connection-reuse.ts';
import { jsonRequests, type JsonRequests } from '../../operator/src/kube/json-requests.ts';
import { listMetadata, metadataOnlyWatch, type ObjectMetadata } from '../../operator/src/kube/metadata-only.ts';
import { Informer } from '../../operator/src/controller/informer.ts';
import { createNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';

const NS = 'metadata-only';
const configMaps = `/api/v1/namespaces/${NS}/configmaps`;
const SELECTOR = 'metadata-only-test=yes';
/** 600 KiB of data per ConfigMap: a whole object would be hard to miss. */
const BIG = 'd'.repeat(600 * 1024);
let kubeConfig: KubeConfig;
let json: JsonRequests;
/**
 * The owner every test ConfigMap names, as a diff names its run. It must exist: the garbage
 * collector deletes an object whose owner's uid is gone (in CI it took the test's ConfigMaps).
 */
let owner: { apiVersion: string; kind: string; name: string; uid: string };

const configMap = (name: string, data: string): V1ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, labels: { 'metadata-only-test': 'yes' }, ownerReferences: [owner] },
  data: { 'diff.patch': data },
});

beforeAll(async () => {
  await createNamespace(NS);
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  json = jsonRequests(reuseConnections(kubeConfig));
  const made = await json.send<{ metadata: { uid: string } }>('POST', configMaps, { metadata: { name: 'the-owner' } });
  owner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'the-owner', uid: made.metadata.uid };
  await json.send('POST', configMaps, configMap('listed', BIG));
  // Not labelled: the selector leaves it out.
  await json.send('POST', configMaps, { ...configMap('other', 'x'), metadata: { name: 'other' } });
}, 60_000);

const stopped: Array<() => void> = [];
afterAll(() => {
  for (const stop of stopped) stop();
});

describe('listMetadata', () => {
  it('lists the selected ConfigMaps with their metadata and without their data', async () => {
    const list = await listMetadata(json, configMaps, SELECTOR);
    expect(list.metadata?.resourceVersion).toMatch(/^\d+$/);
    expect(list.items.map((item) => item.metadata?.name)).toEqual(['listed']);
    const [item] = list.items as Array<ObjectMetadata & { data?: unknown }>;
    expect(item!.kind).toBe('PartialObjectMetadata');
    expect(item!.data).toBeUndefined();
    expect(item!.metadata?.labels).toEqual({ 'metadata-only-test': 'yes' });
    expect(item!.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'ConfigMap', name: 'the-owner', uid: owner.uid });
    expect(item!.metadata?.resourceVersion).toMatch(/^\d+$/);
    expect(JSON.stringify(list).length).toBeLessThan(4096);
  });

  it('lists an empty selection as no items (the API server sends null)', async () => {
    const list = await listMetadata(json, configMaps, 'metadata-only-test=nothing-has-this');
    expect(list.items).toEqual([]);
    expect(list.metadata?.resourceVersion).toMatch(/^\d+$/);
  });
});

describe('metadataOnlyWatch', () => {
  it('feeds an Informer every create, change and delete as metadata, never the data', async () => {
    const seen: Array<{ type: string; object: ObjectMetadata & { data?: unknown } }> = [];
    const informer = new Informer<ObjectMetadata>(
      metadataOnlyWatch(kubeConfig),
      { path: configMaps, labelSelector: SELECTOR, list: () => listMetadata(json, configMaps, SELECTOR) },
      {
        onChange: (object) => seen.push({ type: 'change', object }),
        onDelete: (object) => seen.push({ type: 'delete', object }),
      },
      { warn: () => {} },
    );
    stopped.push(() => informer.stop());
    await informer.start();
    // From its first list, before any watch event.
    expect(informer.get(NS, 'listed')?.metadata?.name).toBe('listed');

    await json.send('POST', configMaps, configMap('watched', BIG));
    await json.send('PATCH', `${configMaps}/watched`, { data: { 'diff.patch': `${BIG}more` } }, 'application/merge-patch+json');
    await json.send(
      'PATCH',
      `${configMaps}/watched`,
      { metadata: { labels: { 'metadata-only-test': 'no' } } },
      'application/merge-patch+json',
    );

    // Created, changed, then relabelled out of the selector: the watch says it is gone.
    await eventually(
      async () => (seen.some((event) => event.type === 'delete' && event.object.metadata?.name === 'watched') ? true : undefined),
      30_000,
      'the delete',
    );
    const watched = seen.filter((event) => event.object.metadata?.name === 'watched');
    expect(watched.map((event) => event.type)).toEqual(['change', 'change', 'delete']);
    for (const { object } of seen) {
      expect(object.kind).toBe('PartialObjectMetadata');
      expect(object.data).toBeUndefined();
      expect(JSON.stringify(object).length).toBeLessThan(4096);
    }
    expect(watched[0]!.object.metadata?.ownerReferences?.[0]?.uid).toBe(owner.uid);
    expect(informer.get(NS, 'watched')).toBeUndefined();
  });
});
