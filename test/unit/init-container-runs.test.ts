// The init-container rule: what the kubelet reports a custom image's chamvi-tools ran, judged by
// its digest against the digests the operator knows (the built images' and the run's record's),
// whatever repository name the runtime gives it; by the operator's repository otherwise; pending
// while the kubelet names no image it ran. A digest the pod's spec or the run's spec names is
// never known: whoever patches the pod can patch it back at the digest of whatever ran.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { podAdditions, sandboxPodShape } from '../../operator/src/reconcile/admitted-pod.ts';
import {
  initContainerRuns,
  knownDigests,
  ranImageVerdict,
  type RanImageRule,
  type RanImageVerdict,
} from '../../operator/src/reconcile/init-container-runs.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const KNOWN = `sha256:${'a'.repeat(64)}`;
const OTHER = `sha256:${'b'.repeat(64)}`;
const BUILT = `ghcr.io/chamvi/chamvi-sandbox:0.1.0@${KNOWN}`;

/** chamvi-tools as a kubelet reports it once it ran and exited 0, from `image`, with `imageID`. */
const ran = (image: string, imageID: string, state: V1ContainerStatus['state'] = { terminated: { exitCode: 0 } }): V1ContainerStatus => ({
  name: 'chamvi-tools',
  image,
  imageID,
  restartCount: 0,
  ready: false,
  state,
});

describe('ranImageVerdict: the image an init container ran, by the kubelet report', () => {
  const pinned: RanImageRule = { built: [BUILT], known: knownDigests([BUILT], undefined) };
  const unpinned: RanImageRule = {
    built: ['ghcr.io/chamvi/chamvi-sandbox:0.1.0'],
    known: knownDigests(['ghcr.io/chamvi/chamvi-sandbox:0.1.0'], undefined),
  };
  const recorded: RanImageRule = {
    built: ['ghcr.io/chamvi/chamvi-sandbox:0.1.0'],
    known: knownDigests(['ghcr.io/chamvi/chamvi-sandbox:0.1.0'], `ghcr.io/chamvi/chamvi-sandbox:0.1.0@${KNOWN}`),
  };
  const cases: Array<[string, V1ContainerStatus | undefined, RanImageRule, RanImageVerdict]> = [
    [
      'the built repository at the known digest',
      ran('ghcr.io/chamvi/chamvi-sandbox:0.1.0', `ghcr.io/chamvi/chamvi-sandbox@${KNOWN}`),
      pinned,
      'passes',
    ],
    [
      'the known digest under another repository name (a copy another tenant pulled)',
      ran('docker.io/a/copy:1', `docker.io/a/copy@${KNOWN}`),
      pinned,
      'passes',
    ],
    [
      'the known digest under another name, as dockershim prefixes it',
      ran('docker.io/a/copy:1', `docker-pullable://docker.io/a/copy@${KNOWN}`),
      pinned,
      'passes',
    ],
    ["the record's digest under another repository name", ran('docker.io/a/copy:1', `docker.io/a/copy@${KNOWN}`), recorded, 'passes'],
    ['another digest under another repository name', ran('docker.io/a/copy:1', `docker.io/a/copy@${OTHER}`), pinned, 'fails'],
    ['another digest under another name, nothing pinned', ran('docker.io/a/copy:1', `docker.io/a/copy@${KNOWN}`), unpinned, 'fails'],
    ['another image altogether', ran('evil.example/rigged:1', `evil.example/rigged@${OTHER}`), pinned, 'fails'],
    // The operator's own repository: every build there is the operator's (an older one patched in and back).
    [
      "another digest of the operator's repository",
      ran('ghcr.io/chamvi/chamvi-sandbox:0.0.9', `ghcr.io/chamvi/chamvi-sandbox@${OTHER}`),
      pinned,
      'passes',
    ],
    [
      "a tag of the operator's repository, nothing pinned",
      ran('ghcr.io/chamvi/chamvi-sandbox:0.1.0', `ghcr.io/chamvi/chamvi-sandbox@${OTHER}`),
      unpinned,
      'passes',
    ],
    // A bare sha256: is the config digest of an image with no repository digest (loaded onto the node): not a manifest digest.
    ['a bare config digest equal to the known one, under another name', ran('docker.io/a/copy:1', KNOWN), pinned, 'fails'],
    ["a bare config digest, the operator's repository by name", ran('ghcr.io/chamvi/chamvi-sandbox:latest', OTHER), pinned, 'passes'],
    // kwok and virtual kubelets report no imageID: the name alone judges it.
    ['ran, no imageID reported, under the built repository', ran('ghcr.io/chamvi/chamvi-sandbox:0.1.0', ''), pinned, 'passes'],
    ['running, no imageID reported, under another name', ran('docker.io/a/copy:1', '', { running: {} }), pinned, 'fails'],
    [
      'waiting (not run yet)',
      ran('ghcr.io/chamvi/chamvi-sandbox:0.1.0', '', { waiting: { reason: 'PodInitializing' } }),
      pinned,
      'pending',
    ],
    ['waiting, an imageID left over', ran('evil.example/rigged:1', `evil.example/rigged@${OTHER}`, { waiting: {} }), pinned, 'pending'],
    ['no status at all', undefined, pinned, 'pending'],
  ];
  it.each(cases)('%s', (_name, status, rule, verdict) => {
    expect(ranImageVerdict(status, rule)).toBe(verdict);
  });
});

describe('knownDigests: only the built images and the record', () => {
  it('takes the digests the built images and the record are pinned to, and nothing from an unpinned image', () => {
    expect([...knownDigests([BUILT, 'ghcr.io/chamvi/chamvi-sandbox:0.1.0'], undefined)]).toEqual([KNOWN]);
    expect([...knownDigests(['ghcr.io/chamvi/chamvi-sandbox:0.1.0'], `mirror.example/chamvi-sandbox@${OTHER}`)]).toEqual([OTHER]);
    expect(knownDigests(['ghcr.io/chamvi/chamvi-sandbox:0.1.0'], undefined).size).toBe(0);
  });
});

describe("initContainerRuns on a run's custom-image pod: a digest a spec names is never known", () => {
  const config = loadOperatorConfig({ sandboxImage: BUILT, allowImages: ['registry.example/**'] }, {});
  const unpinnedConfig = loadOperatorConfig(
    { sandboxImage: 'ghcr.io/chamvi/chamvi-sandbox:0.1.0', allowImages: ['registry.example/**'] },
    {},
  );
  const parsedRun = (image: string): ParsedCodingRun => {
    const run = codingRunFixture({ spec: { sandbox: { image } } });
    return { ...run, spec: codingRunSpec.parse(run.spec) };
  };
  /** The run's pod as built and admitted, Running, its chamvi-tools reported as `status`. */
  const runPod = (run: ParsedCodingRun, built: typeof config, status: V1ContainerStatus): V1Pod => {
    const pod = buildSandboxPod(run, built);
    pod.metadata = { ...pod.metadata, uid: 'pod-uid-1', generation: 1 };
    pod.status = { phase: 'Running', initContainerStatuses: [status] };
    return pod;
  };

  it('passes the built digest reported under the name of a copy another tenant pulled', () => {
    const run = parsedRun('registry.example/custom:1');
    const pod = runPod(run, config, ran('docker.io/a/copy:1', `docker.io/a/copy@${KNOWN}`));
    expect(initContainerRuns(pod, sandboxPodShape(run, config))).toEqual([]);
  });

  it("passes a digest the run's record holds (a webhook pinned it at admission), under any name", () => {
    const run = parsedRun('registry.example/custom:1');
    const pod = runPod(run, unpinnedConfig, ran('docker.io/a/copy:1', `docker.io/a/copy@${KNOWN}`));
    const record = {
      uid: 'pod-uid-1',
      images: [
        { container: 'sandbox', image: 'registry.example/custom:1' },
        { container: 'chamvi-tools', image: `ghcr.io/chamvi/chamvi-sandbox:0.1.0@${KNOWN}` },
      ],
    };
    const shape = sandboxPodShape({ ...run, status: { podName: pod.metadata!.name!, admittedPod: record } }, unpinnedConfig);
    expect(initContainerRuns(pod, shape)).toEqual([]);
    // The record holds for its own pod only.
    expect(initContainerRuns({ ...pod, metadata: { ...pod.metadata, uid: 'pod-uid-2' } }, shape)).toEqual([
      expect.objectContaining({ kind: 'image', container: 'chamvi-tools' }),
    ]);
  });

  it('refuses a digest the run names as its own image, reported for chamvi-tools under any name', () => {
    const run = parsedRun(`registry.example/custom@${OTHER}`);
    for (const imageID of [`registry.example/custom@${OTHER}`, `docker.io/a/copy@${OTHER}`]) {
      const pod = runPod(run, config, ran(imageID.replace(/@.*/, ':1'), imageID));
      expect(initContainerRuns(pod, sandboxPodShape(run, config))).toEqual([
        expect.objectContaining({ kind: 'image', container: 'chamvi-tools' }),
      ]);
    }
  });

  it("refuses a digest the pod's spec names: chamvi-tools patched back to the built repository at the digest of what ran", () => {
    const run = parsedRun('registry.example/custom:1');
    const pod = runPod(run, unpinnedConfig, ran('evil.example/rigged:1', `evil.example/rigged@${OTHER}`));
    pod.spec!.initContainers![0]!.image = `ghcr.io/chamvi/chamvi-sandbox@${OTHER}`;
    const shape = sandboxPodShape(run, unpinnedConfig);
    expect(initContainerRuns(pod, shape)).toEqual([expect.objectContaining({ kind: 'image', container: 'chamvi-tools' })]);
    expect(podAdditions(pod, shape)).toContainEqual(expect.objectContaining({ kind: 'image', name: 'evil.example/rigged:1' }));
  });

  it('judges a chamvi-tools with no imageID reported (kwok) by the name it ran; waits on one not started', () => {
    const run = parsedRun('registry.example/custom:1');
    const noImageId = runPod(run, config, ran(BUILT, ''));
    expect(initContainerRuns(noImageId, sandboxPodShape(run, config))).toEqual([]);
    const copy = runPod(run, config, ran('docker.io/a/copy:1', ''));
    expect(initContainerRuns(copy, sandboxPodShape(run, config))).toEqual([expect.objectContaining({ kind: 'image' })]);
    const pending = { ...noImageId, status: { phase: 'Pending', initContainerStatuses: [ran(BUILT, '', { waiting: {} })] } };
    expect(initContainerRuns(pending, sandboxPodShape(run, config))).toEqual([]);
  });
});
