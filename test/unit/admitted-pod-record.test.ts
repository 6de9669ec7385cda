// status.admittedPod: the reconciler records the pod's images only from the API server's answer
// to its create or claim, a claim's only while the pool pod's generation shows no change since
// admission beyond the claim, so an image patched in before the record is never recorded.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRunStatus, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { admittedPodRecord, withAdmittedPod, type PodSeen } from '../../operator/src/reconcile/admitted-pod-record.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});
const run = ((fixture) => ({ ...fixture, spec: codingRunSpec.parse(fixture.spec) }) as ParsedCodingRun)(
  codingRunFixture({ spec: { sandbox: { image: 'acme/builder:2' } } }),
);
const FRESH = sandboxPodName(run);
const PINNED = `docker.io/acme/builder:2@sha256:${'0a'.repeat(32)}`;
const PATCHED = `acme/builder:2@sha256:${'bb'.repeat(32)}`;

/** The run's pod as the API server stores it: a uid, a generation, the sandbox image as a webhook pinned it. */
function storedPod(options: { name?: string; generation?: number; image?: string } = {}): V1Pod {
  const pod = structuredClone(buildSandboxPod(run, config));
  pod.metadata = { ...pod.metadata, name: options.name ?? FRESH, uid: `uid-${options.name ?? FRESH}` };
  if (options.generation !== undefined) pod.metadata.generation = options.generation;
  pod.spec!.containers[0]!.image = options.image ?? PINNED;
  return pod;
}

const seen = (pod: V1Pod, from: PodSeen['from']): PodSeen => ({ pod, from, freshName: FRESH });
const imagesOf = (record: ReturnType<typeof admittedPodRecord>) =>
  record && Object.fromEntries(record.images.map((e) => [e.container, e.image]));

describe('admittedPodRecord', () => {
  it("records every container's and init container's image from the create's answer", () => {
    expect(admittedPodRecord(seen(storedPod({ generation: 1 }), 'create'))).toEqual({
      uid: `uid-${FRESH}`,
      images: [
        { container: 'sandbox', image: PINNED },
        { container: 'chamvi-tools', image: 'chamvi/sandbox:1' },
      ],
    });
  });

  it.each([
    [
      'a claim of a pool pod, the claim its one change (generation 2)',
      seen(storedPod({ name: 'pool-warm-x', generation: 2 }), 'claim'),
      PINNED,
    ],
    [
      'a claim of a pool pod changed before it (generation 3)',
      seen(storedPod({ name: 'pool-warm-x', generation: 3, image: PATCHED }), 'claim'),
      undefined,
    ],
    [
      'a claim where the API server keeps no generation for pods (before 1.33)',
      seen(storedPod({ name: 'pool-warm-x', image: PATCHED }), 'claim'),
      undefined,
    ],
  ])('%s', (_case, pod, image) => {
    expect(imagesOf(admittedPodRecord(pod))?.sandbox).toBe(image);
  });

  it('records nothing the status schema would refuse, which would stop every status write of the run', () => {
    const long = storedPod({ generation: 1, image: `registry.example/${'a'.repeat(1100)}:1` });
    expect(admittedPodRecord(seen(long, 'create'))).toBeUndefined();
    const many = storedPod({ generation: 1 });
    for (let index = 0; index < 20; index += 1) many.spec!.containers.push({ name: `sidecar-${index}`, image: 'mesh/proxy:1' });
    expect(admittedPodRecord(seen(many, 'create'))).toBeUndefined();
  });
});

describe('withAdmittedPod', () => {
  const provisioning: CodingRunStatus = { phase: 'Provisioning', podName: FRESH };

  it('adds the record of the pod the status names', () => {
    expect(withAdmittedPod(provisioning, seen(storedPod({ generation: 1 }), 'create')).admittedPod?.uid).toBe(`uid-${FRESH}`);
  });

  it('keeps the first record of a pod: a later answer about it, patched, changes nothing', () => {
    const recorded = withAdmittedPod(provisioning, seen(storedPod({ generation: 1 }), 'create'));
    const later = withAdmittedPod({ ...recorded, phase: 'Running' }, seen(storedPod({ generation: 1, image: PATCHED }), 'create'));
    expect(imagesOf(later.admittedPod)?.sandbox).toBe(PINNED);
  });

  it('keeps the status as it is without an answer: a run whose create answer was lost gets no record', () => {
    expect(withAdmittedPod(provisioning, undefined)).toBe(provisioning);
  });

  it("replaces the record of an earlier pod, or drops it when this one's images cannot be vouched for", () => {
    const earlier: CodingRunStatus = {
      ...provisioning,
      admittedPod: { uid: 'uid-earlier', images: [{ container: 'sandbox', image: 'x:1' }] },
    };
    expect(withAdmittedPod(earlier, seen(storedPod({ generation: 1 }), 'create')).admittedPod?.uid).toBe(`uid-${FRESH}`);
    const pool: CodingRunStatus = { ...earlier, podName: 'pool-warm-x' };
    expect(withAdmittedPod(pool, seen(storedPod({ name: 'pool-warm-x', generation: 3 }), 'claim')).admittedPod).toBeUndefined();
  });

  it('drops the record of a run sent back to Pending without a pod (its pod refused)', () => {
    const recorded = withAdmittedPod(provisioning, seen(storedPod({ generation: 1 }), 'create'));
    expect(withAdmittedPod({ ...recorded, phase: 'Pending', podName: undefined }, undefined).admittedPod).toBeUndefined();
  });

  it('records nothing for a pod of another name, nor in a finished run', () => {
    expect(withAdmittedPod(provisioning, seen(storedPod({ name: 'other', generation: 1 }), 'create')).admittedPod).toBeUndefined();
    const failed: CodingRunStatus = { phase: 'Failed', reason: 'SandboxLost', podName: FRESH };
    expect(withAdmittedPod(failed, seen(storedPod({ generation: 1 }), 'create'))).toBe(failed);
  });
});
