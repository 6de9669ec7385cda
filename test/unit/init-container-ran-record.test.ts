// The init-container rule with an unpinned sandboxImage: no digest is known, and a chamvi-tools
// passes only by the operator's repository name, which containerd gives up for the first of the
// image's references on the node in lexical order once another tenant pulls a copy
// (docker.io/a/copy). The digest the kubelet first reports under the operator's repository is
// recorded in the run's record of its pod (status.admittedPod), and known for that pod from then
// on; for no other pod, from no spec, and from no pod but the one the record names.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRunStatus, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { podAdditions, sandboxPodShape } from '../../operator/src/reconcile/admitted-pod.ts';
import { withAdmittedPod, withRanImages } from '../../operator/src/reconcile/admitted-pod-record.ts';
import { initContainerRuns, ranImageKey } from '../../operator/src/reconcile/init-container-runs.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const KNOWN = `sha256:${'a'.repeat(64)}`;
const OTHER = `sha256:${'b'.repeat(64)}`;
const OPERATOR_IMAGE = 'ghcr.io/chamvi/chamvi-sandbox:0.1.0';
const config = loadOperatorConfig({ sandboxImage: OPERATOR_IMAGE, allowImages: ['registry.example/**'] }, {});

const parsedRun = (image: string): ParsedCodingRun => {
  const run = codingRunFixture({ spec: { sandbox: { image } } });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
};
const run = parsedRun('registry.example/custom:1');

/** chamvi-tools as the kubelet reports it once it ran and exited 0. */
const ran = (image: string, imageID: string, state: V1ContainerStatus['state'] = { terminated: { exitCode: 0 } }): V1ContainerStatus => ({
  name: 'chamvi-tools',
  image,
  imageID,
  restartCount: 0,
  ready: false,
  state,
});

/** The run's custom-image pod as the API server answered its create, under `uid`. */
function created(uid: string, of: ParsedCodingRun = run): V1Pod {
  const pod = structuredClone(buildSandboxPod(of, config));
  pod.metadata = { ...pod.metadata, uid, generation: 1 };
  return pod;
}

/** The pod as the cache has it later: Running, its chamvi-tools reported as `status`. */
const reporting = (pod: V1Pod, status: V1ContainerStatus): V1Pod => ({
  ...pod,
  status: { phase: 'Running', initContainerStatuses: [status] },
});

/** The status the reconciler writes once it created `pod`: the pod named, its record made from the answer. */
const givenPod = (pod: V1Pod, status: CodingRunStatus = { phase: 'Provisioning' }, of: ParsedCodingRun = run): CodingRunStatus =>
  withAdmittedPod({ ...status, podName: pod.metadata!.name! }, { pod, from: 'create', freshName: sandboxPodName(of) });

const shapeWith = (status: CodingRunStatus, of: ParsedCodingRun = run) => sandboxPodShape({ ...of, status }, config);
const refusedChamviTools = [expect.objectContaining({ kind: 'image', container: 'chamvi-tools' })];

const BY_NAME = ran(OPERATOR_IMAGE, `ghcr.io/chamvi/chamvi-sandbox@${KNOWN}`);
const COPY_OF_IT = ran('docker.io/a/copy:1', `docker.io/a/copy@${KNOWN}`);
const ANOTHER_COPY = ran('docker.io/a/copy:1', `docker.io/a/copy@${OTHER}`);

describe("the digest a pod's chamvi-tools ran under the operator's repository, kept for that pod", () => {
  const pod = created('pod-uid-1');
  const given = givenPod(pod);
  const recorded = withRanImages({ ...given, phase: 'Running' }, reporting(pod, BY_NAME), OPERATOR_IMAGE);

  it('a pod that passed by name still passes when the runtime names the same digest by another repository', () => {
    expect(initContainerRuns(reporting(pod, BY_NAME), shapeWith(recorded))).toEqual([]);
    expect(initContainerRuns(reporting(pod, COPY_OF_IT), shapeWith(recorded))).toEqual([]);
    expect(podAdditions(reporting(pod, COPY_OF_IT), shapeWith(recorded))).toEqual([]);
    // Without the record the same report fails: the flip this record prevents.
    expect(initContainerRuns(reporting(pod, COPY_OF_IT), shapeWith(given))).toEqual(refusedChamviTools);
  });

  it('another digest under another repository name still fails', () => {
    expect(initContainerRuns(reporting(pod, ANOTHER_COPY), shapeWith(recorded))).toEqual(refusedChamviTools);
  });

  it('records the reported repository and digest once, beside the admitted images', () => {
    expect(recorded.admittedPod?.images).toEqual([
      ...given.admittedPod!.images,
      { container: ranImageKey('chamvi-tools'), image: `ghcr.io/chamvi/chamvi-sandbox@${KNOWN}` },
    ]);
    // Never replaced: not by the copy's name, nor by another digest of the repository.
    expect(withRanImages(recorded, reporting(pod, COPY_OF_IT), OPERATOR_IMAGE)).toBe(recorded);
    const later = ran(OPERATOR_IMAGE, `ghcr.io/chamvi/chamvi-sandbox@${OTHER}`);
    expect(withRanImages(recorded, reporting(pod, later), OPERATOR_IMAGE)).toBe(recorded);
  });

  it('a new pod of the run does not inherit it', () => {
    const second = created('pod-uid-2');
    const remade = givenPod(second, recorded);
    expect(remade.admittedPod?.uid).toBe('pod-uid-2');
    expect(remade.admittedPod?.images.map(({ container }) => container)).not.toContain(ranImageKey('chamvi-tools'));
    expect(initContainerRuns(reporting(second, COPY_OF_IT), shapeWith(remade))).toEqual(refusedChamviTools);
    // Nor does another pod judged against the first pod's record (a pod made again under the name).
    expect(initContainerRuns(reporting(second, COPY_OF_IT), shapeWith(recorded))).toEqual(refusedChamviTools);
  });
});

describe('what is never recorded', () => {
  const pod = created('pod-uid-1');
  const given = { ...givenPod(pod), phase: 'Running' as const };
  const unchanged = (status: CodingRunStatus, seen: V1Pod | undefined) => expect(withRanImages(status, seen, OPERATOR_IMAGE)).toBe(status);

  it('a pod other than the one the record names: planted at the name (another uid), or under another name', () => {
    unchanged(given, reporting(created('planted-uid'), BY_NAME));
    unchanged(given, reporting({ ...pod, metadata: { ...pod.metadata, name: 'elsewhere' } }, BY_NAME));
    unchanged(given, undefined);
  });

  it('a run with no record, or a finished one', () => {
    const { admittedPod: _none, ...withoutRecord } = given;
    unchanged(withoutRecord, reporting(pod, BY_NAME));
    unchanged({ ...given, phase: 'Failed' }, reporting(pod, BY_NAME));
  });

  it("a report that ties the digest to no name of the operator's repository", () => {
    // The repository in `image` only: the runtime's name, not tied to the digest it reports.
    unchanged(given, reporting(pod, ran(OPERATOR_IMAGE, `evil.example/rigged@${OTHER}`)));
    unchanged(given, reporting(pod, COPY_OF_IT));
    // A config digest (a bare sha256:), and a container not run yet whose status carries an imageID.
    unchanged(given, reporting(pod, ran(OPERATOR_IMAGE, KNOWN)));
    unchanged(given, reporting(pod, ran(OPERATOR_IMAGE, `ghcr.io/chamvi/chamvi-sandbox@${KNOWN}`, { waiting: {} })));
  });

  it("a digest a spec names: the run's image, or chamvi-tools patched back to the operator's repository at it", () => {
    const naming = parsedRun(`registry.example/custom@${OTHER}`);
    const itsPod = created('pod-uid-3', naming);
    const itsStatus = { ...givenPod(itsPod, { phase: 'Provisioning' }, naming), phase: 'Running' as const };
    for (const report of [ran('registry.example/custom:1', `registry.example/custom@${OTHER}`), ANOTHER_COPY]) {
      unchanged(itsStatus, reporting(itsPod, report));
      expect(initContainerRuns(reporting(itsPod, report), shapeWith(itsStatus, naming))).toEqual(refusedChamviTools);
    }
    const patchedBack = reporting(pod, ran('evil.example/rigged:1', `evil.example/rigged@${OTHER}`));
    patchedBack.spec!.initContainers![0]!.image = `ghcr.io/chamvi/chamvi-sandbox@${OTHER}`;
    unchanged(given, patchedBack);
  });

  it("an init container the API server did not admit in the pod, and a record at the status' bounds", () => {
    unchanged(given, reporting(pod, { ...BY_NAME, name: 'added-later' }));
    const full = {
      ...given,
      admittedPod: {
        ...given.admittedPod!,
        images: [
          ...given.admittedPod!.images,
          ...Array.from({ length: 16 - given.admittedPod!.images.length }, (_, index) => ({ container: `c${index}`, image: 'x:1' })),
        ],
      },
    };
    unchanged(full, reporting(pod, BY_NAME));
  });
});
