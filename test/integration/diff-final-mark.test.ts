// The run's diff ConfigMap on the real API server (workers/run-resources.ts): a step's snapshot
// that lands after the run's ending stored its final diff leaves the diff whose sha256 the
// ender wrote to status.result.diffSha256 (before the mark, it replaced it and every reader,
// kubectl codingrun diff, continueFrom, evals, publish, refused the run's diff for good); and a
// final mark with a diff planted by someone who may update ConfigMaps is replaced by the
// ender's own diff, never certified. The same contract local mode passes
// (test/unit/diff-write.test.ts), and the mark on the generated name a squatted run's diff goes under.
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun, ParsedCodingRun } from '../../operator/src/api/index.ts';
import { DIFF_KIND_ANNOTATION, decodeDiff } from '../../operator/src/reconcile/diff-config-map.ts';
import { diffConfigMapName } from '../../operator/src/reconcile/names.ts';
import { kubernetesRunResources, type RunResources } from '../../operator/src/workers/run-resources.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { describeDiffWriteContract } from '../support/diff-write-contract.ts';

const namespace = `diff-final-mark-${process.pid}`;
let kubeConfig: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;
let resources: RunResources;
let runs = 0;

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  core = kubeConfig.makeApiClient(CoreV1Api);
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
  resources = kubernetesRunResources(kubeConfig);
  await createNamespace(namespace);
});

afterAll(async () => {
  await deleteNamespace(namespace);
});

/** A run as the API server stores it (its uid is what the diff ConfigMap's ownerReference names; no operator runs). */
async function createRun(): Promise<ParsedCodingRun> {
  const body = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `run-${++runs}` },
    spec: {
      task: 'Make the README greet the world',
      repository: { url: 'https://github.com/acme/hello.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
  };
  const run = await custom.createNamespacedCustomObject({
    group: 'chamvi.dev',
    version: 'v1alpha1',
    namespace,
    plural: 'codingruns',
    body,
  });
  return run as CodingRun as ParsedCodingRun;
}

const readConfigMap = (name: string) =>
  core
    .readNamespacedConfigMap({ namespace, name })
    .catch((error: { code?: number }) => (error.code === 404 ? undefined : Promise.reject(error)));

describeDiffWriteContract('the cluster (run-resources.ts, the real API server)', async () => ({
  run: await createRun(),
  resources,
  configMap: readConfigMap,
  // As someone who may update ConfigMaps in the namespace would: over the version there, if any.
  put: async (body: V1ConfigMap) => {
    const name = body.metadata!.name!;
    const existing = await readConfigMap(name);
    if (!existing) await core.createNamespacedConfigMap({ namespace, body });
    else
      await core.replaceNamespacedConfigMap({
        namespace,
        name,
        body: { ...body, metadata: { ...body.metadata, resourceVersion: existing.metadata!.resourceVersion! } },
      });
  },
}));

describe('the mark under a generated name (someone else holds the derived one)', () => {
  it('holds there too: a late snapshot is refused, and a final write stores its own diff even over a planted final mark', async () => {
    const run = await createRun();
    const derived = diffConfigMapName(run);
    const squatted = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: derived, namespace }, data: { diff: 'not the run s' } };
    await core.createNamespacedConfigMap({ namespace, body: squatted });
    const diff = (line: string) => `diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+${line}\n`;

    const snapshot = await resources.writeDiff(run, diff('snapshot'), { kind: 'snapshot' });
    expect(snapshot.outcome).toBe('written');
    expect(snapshot.configMap.startsWith(`${derived}-`)).toBe(true);
    const final = await resources.writeDiff(run, diff('final'), { kind: 'final', written: snapshot.configMap });
    expect(final).toEqual({ outcome: 'written', configMap: snapshot.configMap });

    let stored = diff('final');
    for (const written of [snapshot.configMap, undefined]) {
      const way = written ? { written } : {};
      expect(await resources.writeDiff(run, diff('late'), { kind: 'snapshot', ...way })).toEqual({
        outcome: 'refused',
        configMap: snapshot.configMap,
      });
      expect(decodeDiff((await readConfigMap(snapshot.configMap))!)).toBe(stored);
      // Someone who may update ConfigMaps plants a diff, marked final: the ender's write replaces it.
      const current = (await readConfigMap(snapshot.configMap))!;
      await core.replaceNamespacedConfigMap({
        namespace,
        name: snapshot.configMap,
        body: { ...current, data: { diff: diff('planted') }, binaryData: {} },
      });
      const ender = diff(`the ender's, ${written ? 'patched' : 'read and replaced'}`);
      expect(await resources.writeDiff(run, ender, { kind: 'final', ...way })).toEqual({
        outcome: 'written',
        configMap: snapshot.configMap,
      });
      const after = (await readConfigMap(snapshot.configMap))!;
      expect(decodeDiff(after)).toBe(ender);
      expect(after.metadata?.annotations?.[DIFF_KIND_ANNOTATION]).toBe('final');
      stored = ender;
    }
    expect((await readConfigMap(derived))?.data).toEqual(squatted.data);
  });
});
