// Security #11.8: the probe pod read again is the pod the probe created when only what honest
// controllers change has changed (Kueue's pod integration removes its scheduling gate: a spec
// update, generation 2), and is not when its image was patched, whatever the generation.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { probePodIdentity, whyNotProbePod, withStartedContainers } from '../../operator/src/reconcile/isolation-probe-pod-identity.ts';
import { buildIsolationProbePod } from '../../operator/src/reconcile/isolation-probe-pod.ts';

const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});
const KUEUE_GATE = { name: 'kueue.x-k8s.io/admission' };

/** The probe pod as the API server answers its create in a Kueue-managed namespace: gated, generation 1. */
function createdGated(): V1Pod {
  const pod = structuredClone(buildIsolationProbePod('agents', 'p1', config, 120));
  pod.metadata = { ...pod.metadata, uid: 'uid-probe', generation: 1 };
  pod.spec = { ...pod.spec!, schedulingGates: [KUEUE_GATE], serviceAccountName: 'default' };
  return pod;
}

/** The pod once Kueue admitted its workload: the gate removed (generation 2), then running. */
function ungatedAndRunning(created: V1Pod): V1Pod {
  const pod = structuredClone(created);
  pod.metadata!.generation = 2;
  delete pod.spec!.schedulingGates;
  pod.status = {
    phase: 'Running',
    containerStatuses: pod.spec!.containers.map((container) => ({
      name: container.name,
      image: container.image!,
      imageID: '',
      ready: true,
      restartCount: 0,
      containerID: 'cri://probe-1',
    })),
  };
  return pod;
}

describe('the isolation probe pod read again', () => {
  it('is the pod the probe created after Kueue removed its scheduling gate (generation 2)', () => {
    const created = createdGated();
    const identity = probePodIdentity(created);
    const read = ungatedAndRunning(created);
    expect(whyNotProbePod(read, identity)).toBeUndefined();
    expect(whyNotProbePod(read, withStartedContainers(identity, read))).toBeUndefined();
  });

  it('is not once its image was patched, generation or not', () => {
    const created = createdGated();
    const identity = probePodIdentity(created);
    const patched = ungatedAndRunning(created);
    patched.spec!.containers[0]!.image = 'evil/answers-blocked:1';
    expect(whyNotProbePod(patched, identity)).toBe(
      `container ${patched.spec!.containers[0]!.name} runs image evil/answers-blocked:1, not chamvi/sandbox:1`,
    );
  });
});
