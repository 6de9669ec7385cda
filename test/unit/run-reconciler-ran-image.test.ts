// The reconciler keeps, in its status write, the digest the run's pod's chamvi-tools ran under the
// operator's repository (admitted-pod-record.ts withRanImages), from the cached pod of the record's
// uid only: a pod planted at the run's pod name with its labels and owner reference adds nothing.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRun, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { withAdmittedPod } from '../../operator/src/reconcile/admitted-pod-record.ts';
import { ranImageKey } from '../../operator/src/reconcile/init-container-runs.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryReconcilerScene } from '../support/memory-reconciler-scene.ts';

const KNOWN = `sha256:${'a'.repeat(64)}`;
const OPERATOR_IMAGE = 'ghcr.io/chamvi/chamvi-sandbox:0.1.0';
const config = loadOperatorConfig(
  {
    sandboxImage: OPERATOR_IMAGE,
    allowImages: ['registry.example/**'],
    allowRepo: ['https://github.com/acme/*'],
    allowUnisolatedSandboxes: true,
    networkPolicy: false,
  },
  {},
);
const fixture = codingRunFixture({ spec: { sandbox: { image: 'registry.example/custom:1' } } });
const parsed = { ...fixture, spec: codingRunSpec.parse(fixture.spec) } as ParsedCodingRun;

const BY_NAME: V1ContainerStatus = {
  name: 'chamvi-tools',
  image: OPERATOR_IMAGE,
  imageID: `ghcr.io/chamvi/chamvi-sandbox@${KNOWN}`,
  restartCount: 0,
  ready: false,
  state: { terminated: { exitCode: 0 } },
};

/** The run's pod as created (uid `uid`), as the cache shows it once chamvi-tools ran by the operator's repository name. */
function cachedPod(uid: string): V1Pod {
  const pod = structuredClone(buildSandboxPod(parsed, config));
  pod.metadata = { ...pod.metadata, uid, generation: 1 };
  pod.status = { phase: 'Pending', initContainerStatuses: [BY_NAME] };
  return pod;
}

function scene(pod: V1Pod) {
  const created = { ...cachedPod('pod-uid-1'), status: {} };
  const status = withAdmittedPod(
    { phase: 'Provisioning', podName: sandboxPodName(parsed) },
    { pod: created, from: 'create', freshName: sandboxPodName(parsed) },
  );
  const run: CodingRun = { ...fixture, status };
  const { reconciler, kube } = memoryReconcilerScene(run, { config, now: new Date('2026-11-29T12:00:00Z'), pods: [pod] });
  const key = `${fixture.metadata.namespace}/${fixture.metadata.name}`;
  const written = () => kube.replaceRunStatus.mock.calls.map(([, each]) => each?.admittedPod?.images ?? []).flat();
  return { reconciler, key, written };
}

describe("the reconciler's record of what the run's pod's chamvi-tools ran", () => {
  it("writes the digest the kubelet reports under the operator's repository, for the pod of the record's uid", async () => {
    const { reconciler, key, written } = scene(cachedPod('pod-uid-1'));
    await reconciler.reconcile(key);
    expect(written()).toContainEqual({ container: ranImageKey('chamvi-tools'), image: `ghcr.io/chamvi/chamvi-sandbox@${KNOWN}` });
  });

  it('writes nothing of a pod planted at the name (another uid)', async () => {
    const { reconciler, key, written } = scene(cachedPod('planted-uid'));
    await reconciler.reconcile(key);
    expect(written().map(({ container }) => container)).not.toContain(ranImageKey('chamvi-tools'));
  });
});
