// The exec transport's check of the admitted pod: every session open (a tool session, an
// import, a one-shot call, a session opened ahead into a warm pool pod) reads the pod first,
// and a pod a mutating webhook gave a credential, or whose image was patched, is never exec'd
// into; the refusal ends the run SandboxInvalid at once (a pod's spec cannot lose the volume,
// and a container that ran another image stays a container that did, so no retry helps). The pod
// reader is injected and the kubeconfig names no cluster, so a start that passes the checks
// fails just after them, at "no current cluster".
import { PassThrough } from 'node:stream';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { REASONS, RunFailure, codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { admittedImagesOf, sandboxPodShape, type AdmittedImages } from '../../operator/src/reconcile/admitted-pod.ts';
import { ranImageKey } from '../../operator/src/reconcile/init-container-runs.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { ADMITTED_RECORD_RETRY_MS, KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import type { ToolboxProcess } from '../../operator/src/sandbox/toolbox-transport.ts';
import { decideJobFailure } from '../../operator/src/workers/job-failure.ts';

const PASSED = 'the kubeconfig has no current cluster';
const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});
const run: ParsedCodingRun = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'fix', namespace: 'team', uid: 'run-uid-1' },
  spec: codingRunSpec.parse({
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/x' },
    model: { provider: 'scripted', scriptRef: { name: 's' } },
  }),
};

/** The run's pod as the operator builds it (its labels and controller ownerReference), admitted. */
function ownPod(): V1Pod {
  const pod = buildSandboxPod(run, config);
  pod.metadata!.uid = 'pod-uid-1';
  pod.spec!.serviceAccountName = 'default';
  return pod;
}

/** The same pod as EKS's pod-identity webhook leaves it. */
function irsaPod(): V1Pod {
  const pod = ownPod();
  pod.spec!.volumes!.push({
    name: 'aws-iam-token',
    projected: { sources: [{ serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 86400, path: 'token' } }] },
  });
  const container = pod.spec!.containers[0]!;
  container.env!.push(
    { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::111122223333:role/team' },
    { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
  );
  container.volumeMounts!.push({ name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount', readOnly: true });
  return pod;
}

function transportReading(pod: () => V1Pod, extra: Partial<ConstructorParameters<typeof KubernetesExecTransport>[0]> = {}) {
  let reads = 0;
  const transport = new KubernetesExecTransport({
    kubeConfig: new KubeConfig(),
    namespace: 'team',
    podName: pod().metadata!.name!,
    container: 'sandbox',
    toolboxCommand: ['toolbox'],
    expectedOwnerUid: run.metadata.uid,
    expectedPodShape: sandboxPodShape(run, config),
    readPod: async () => {
      reads += 1;
      return pod();
    },
    ...extra,
  });
  return { transport, reads: () => reads };
}

const refusal = (error: unknown) => ({
  runFailure: RunFailure.isInstance(error),
  reason: (error as RunFailure).reason,
  message: (error as Error).message,
});

describe('the exec transport refuses a pod a webhook added a credential to', () => {
  it("passes the operator's own pod on to the exec", async () => {
    const { transport } = transportReading(ownPod);
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
  });

  it('refuses the IRSA pod before any exec, as a RunFailure SandboxInvalid naming what was added and what to do', async () => {
    const { transport } = transportReading(irsaPod);
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toEqual({ runFailure: true, reason: REASONS.SandboxInvalid, message: expect.stringContaining('aws-iam-token') });
    expect((error as Error).message).not.toContain(PASSED);
    expect((error as Error).message).toContain('env AWS_ROLE_ARN in container sandbox');
    expect((error as Error).message).toContain('eks.amazonaws.com/role-arn');
  });

  it('checks every session open: a tool session, an import, a one-shot call, each reading the pod again', async () => {
    const { transport, reads } = transportReading(irsaPod);
    const serve = new ToolboxSandbox(transport, { mode: 'serve' });
    const call = new ToolboxSandbox(transport, { mode: 'call' });
    const attempts = [
      () => serve.call({ tool: 'read_file', input: { path: 'README.md' } }),
      () => serve.importTree(new PassThrough()),
      () => call.call({ tool: 'bash', input: { command: 'cat /var/run/secrets/eks.amazonaws.com/serviceaccount/token' } }),
    ];
    for (const [index, attempt] of attempts.entries()) {
      const error = await attempt().catch((thrown: unknown) => thrown);
      expect(reads()).toBe(index + 1);
      // Not wrapped in a SandboxError: that one is retried, and only a job out of tries would end the run (SandboxLost).
      expect(SandboxError.isInstance(error)).toBe(false);
      expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
      expect(decideJobFailure(error, { name: 'prepare', attempt: 1, attempts: 10 })).toMatchObject({
        action: 'fail',
        reason: REASONS.SandboxInvalid,
      });
    }
  });

  it('ends a session opened ahead into a warm pool pod that turns out to carry a credential, and hands it to no one', async () => {
    let killed = 0;
    const held = { podUid: 'pod-uid-1', process: { kill: () => (killed += 1) } as unknown as ToolboxProcess };
    const { transport } = transportReading(irsaPod, { warmSessions: { take: async () => held } });
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    expect(killed).toBe(1);
  });
});

describe('the exec transport refuses a pod whose image was changed (security #11.10)', () => {
  /** The run's pod after `kubectl set image pod/... sandbox=attacker/tools:1`, once the kubelet restarted the container from it. */
  function patchedPod(image: string, restartCount: number): () => V1Pod {
    return () => {
      const pod = ownPod();
      pod.spec!.containers[0]!.image = image;
      pod.status = { phase: 'Running', containerStatuses: [{ name: 'sandbox', image, imageID: '', restartCount, ready: true }] };
      return pod;
    };
  }

  it('refuses the patched warm or run pod before any exec, as a RunFailure SandboxInvalid naming the image and the patch', async () => {
    let killed = 0;
    const held = { podUid: 'pod-uid-1', process: { kill: () => (killed += 1) } as unknown as ToolboxProcess };
    const { transport } = transportReading(patchedPod('attacker/tools:1', 1), { warmSessions: { take: async () => held } });
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toEqual({
      runFailure: true,
      reason: REASONS.SandboxInvalid,
      message: expect.stringContaining("image attacker/tools:1 (the operator's pod has chamvi/sandbox:1) in container sandbox"),
    });
    expect((error as Error).message).toContain('container sandbox restarted 1 times');
    expect((error as Error).message).toContain('kubectl set image');
    expect((error as Error).message).not.toContain(PASSED);
    // The session opened into the pool pod before the patch is not handed over either.
    expect(killed).toBe(1);
  });

  it("refuses the pod whose image was patched back to the operator's: its container ran the other one", async () => {
    const { transport } = transportReading(patchedPod(config.sandboxImage, 2));
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toEqual({
      runFailure: true,
      reason: REASONS.SandboxInvalid,
      message: expect.stringContaining('container sandbox restarted 2 times'),
    });
  });

  it('passes the pod the kubelet runs as made, restart count 0', async () => {
    const { transport } = transportReading(patchedPod(config.sandboxImage, 0));
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
  });
});

describe("the exec transport against the run's record of its pod as admitted (status.admittedPod)", () => {
  const customRun: ParsedCodingRun = { ...run, spec: { ...run.spec, sandbox: { ...run.spec.sandbox, image: 'acme/builder:2' } } };
  const PINNED = `docker.io/acme/builder:2@sha256:${'0a'.repeat(32)}`;
  const record = {
    uid: 'pod-uid-1',
    images: [
      { container: 'sandbox', image: PINNED },
      { container: 'chamvi-tools', image: config.sandboxImage },
    ],
  };

  /** The pod pinned by a verifying webhook at admission, then ungated by Kueue (a spec update: generation 2). */
  function ungatedPinnedPod(image = PINNED): () => V1Pod {
    return () => {
      const pod = buildSandboxPod(customRun, config);
      pod.metadata = { ...pod.metadata, uid: 'pod-uid-1', generation: 2 };
      pod.spec!.serviceAccountName = 'default';
      pod.spec!.containers[0]!.image = image;
      return pod;
    };
  }

  const transportFor = (pod: () => V1Pod, shapeRun: ParsedCodingRun, readAdmittedImages?: () => Promise<AdmittedImages | undefined>) =>
    transportReading(pod, {
      expectedPodShape: sandboxPodShape(shapeRun, config),
      ...(readAdmittedImages ? { readAdmittedImages } : {}),
    });

  it('passes a pinned pod Kueue ungated (generation 2) when the run it was made for records its images', async () => {
    const { transport } = transportFor(ungatedPinnedPod(), { ...customRun, status: { podName: 'x', admittedPod: record } });
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    // The same pod without a record: the generation alone cannot tell it from a patch.
    const error = await transportFor(ungatedPinnedPod(), customRun)
      .transport.start(['serve'])
      .catch((thrown: unknown) => thrown);
    expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
  });

  it("reads the run's record where the shape has none (a claimed pool pod's lands after its agent starts), once", async () => {
    let reads = 0;
    const { transport } = transportFor(ungatedPinnedPod(), customRun, async () => {
      reads += 1;
      return admittedImagesOf({ admittedPod: record });
    });
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    expect(reads).toBe(1);
  });

  it('reads the run once per pod when it has no record, not on every exec start (a CodingRun GET each)', async () => {
    let reads = 0;
    const { transport } = transportFor(ungatedPinnedPod(), customRun, async () => {
      reads += 1;
      return undefined;
    });
    for (let start = 0; start < 3; start += 1) await transport.start(['serve']).catch(() => undefined);
    expect(reads).toBe(1);
  });

  it("reads the run again after a miss once ADMITTED_RECORD_RETRY_MS passed: a pool pod's first exec may race its record", async () => {
    let now = 1_000_000;
    let reads = 0;
    const { transport } = transportReading(ungatedPinnedPod(), {
      expectedPodShape: sandboxPodShape(customRun, config),
      now: () => now,
      readAdmittedImages: async () => (++reads === 1 ? undefined : admittedImagesOf({ admittedPod: record })),
    });
    const first = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(first)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    now += ADMITTED_RECORD_RETRY_MS - 1;
    await transport.start(['serve']).catch(() => undefined);
    expect(reads).toBe(1);
    now += 1;
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    // Found, the record is kept: no more reads of the run.
    now += ADMITTED_RECORD_RETRY_MS;
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    expect(reads).toBe(2);
  });

  it('does not remember a read of the run that failed: the next exec start reads it again', async () => {
    let reads = 0;
    const { transport } = transportFor(ungatedPinnedPod(), customRun, async () => {
      reads += 1;
      if (reads === 1) throw new Error('etcdserver: request timed out');
      return admittedImagesOf({ admittedPod: record });
    });
    const first = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(first)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    expect(reads).toBe(2);
  });

  it('refuses a pod whose image is not the recorded one, naming the admitted image', async () => {
    const other = `acme/builder:2@sha256:${'bb'.repeat(32)}`;
    const { transport } = transportFor(ungatedPinnedPod(other), customRun, async () => admittedImagesOf({ admittedPod: record }));
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toEqual({
      runFailure: true,
      reason: REASONS.SandboxInvalid,
      message: expect.stringContaining(`image ${other} (the API server admitted ${PINNED}) in container sandbox`),
    });
  });

  it('judges the pod without a record when the run cannot be read, as it did before records were kept', async () => {
    const { transport } = transportFor(ungatedPinnedPod(), customRun, () => Promise.reject(new Error('etcdserver: request timed out')));
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    expect((error as Error).message).toContain("the pod's spec was changed after it was made (generation 2)");
  });
});

describe("the exec transport judges a custom image's init container by what the kubelet ran (the run's own pod)", () => {
  const customRun: ParsedCodingRun = { ...run, spec: { ...run.spec, sandbox: { ...run.spec.sandbox, image: 'acme/builder:2' } } };
  const record = {
    uid: 'pod-uid-1',
    images: [
      { container: 'sandbox', image: 'acme/builder:2' },
      { container: 'chamvi-tools', image: config.sandboxImage },
    ],
  };

  /** The run's custom-image pod, Ready, its chamvi-tools having run from `ranImage`, reported with `imageID` (the spec is the built one). */
  function readyPod(ranImage: string | undefined, imageID = `${ranImage?.replace(/:[^:/]+$/, '')}@sha256:${'c'.repeat(64)}`): () => V1Pod {
    return () => {
      const pod = buildSandboxPod(customRun, config);
      pod.metadata = { ...pod.metadata, uid: 'pod-uid-1', generation: 1 };
      pod.spec!.serviceAccountName = 'default';
      pod.status = {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True' }],
        initContainerStatuses:
          ranImage === undefined
            ? []
            : [
                {
                  name: 'chamvi-tools',
                  image: ranImage,
                  imageID,
                  restartCount: 0,
                  ready: true,
                  state: { terminated: { exitCode: 0 } },
                },
              ],
        containerStatuses: [
          { name: 'sandbox', image: 'docker.io/acme/builder:2', imageID: '', restartCount: 0, ready: true, state: { running: {} } },
        ],
      };
      return pod;
    };
  }

  const transportFor = (pod: () => V1Pod) =>
    transportReading(pod, { expectedPodShape: sandboxPodShape({ ...customRun, status: { podName: 'x', admittedPod: record } }, config) });

  it('passes the pod whose chamvi-tools ran from the operator image, however the runtime spells it', async () => {
    await expect(transportFor(readyPod(`docker.io/${config.sandboxImage}`)).transport.start(['serve'])).rejects.toThrow(PASSED);
  });

  it('refuses the pod whose chamvi-tools ran another image patched in and back while it was Pending', async () => {
    const error = await transportFor(readyPod('docker.io/attacker/tools:1'))
      .transport.start(['serve'])
      .catch((thrown: unknown) => thrown);
    expect(refusal(error)).toEqual({
      runFailure: true,
      reason: REASONS.SandboxInvalid,
      message: expect.stringContaining('image docker.io/attacker/tools:1 (the kubelet ran it from this image'),
    });
    expect((error as Error).message).toContain('in container chamvi-tools');
  });

  // The spec check takes any digest of the operator's repository on a run with no record: a
  // digest counted as known because the spec names it let an image of any repository through.
  it("refuses the pod whose chamvi-tools ran another image, patched back to the operator's repository at that image's digest", async () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    const patchedBack = () => {
      const pod = readyPod('docker.io/attacker/tools:1', `docker.io/attacker/tools@${digest}`)();
      pod.spec!.initContainers![0]!.image = `${config.sandboxImage.replace(/:[^:/]+$/, '')}@${digest}`;
      return pod;
    };
    const error = await transportReading(patchedBack, { expectedPodShape: sandboxPodShape(customRun, config) })
      .transport.start(['serve'])
      .catch((thrown: unknown) => thrown);
    expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    expect((error as Error).message).toContain('in container chamvi-tools');
  });

  it('refuses the Ready pod whose kubelet reports no run of chamvi-tools', async () => {
    const error = await transportFor(readyPod(undefined))
      .transport.start(['serve'])
      .catch((thrown: unknown) => thrown);
    expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    expect((error as Error).message).toContain('the kubelet reports no run of it');
  });

  it('passes the Ready pod whose kubelet reports a run of chamvi-tools under the built name but no imageID (kwok)', async () => {
    await expect(transportFor(readyPod(config.sandboxImage, '')).transport.start(['serve'])).rejects.toThrow(PASSED);
  });

  it('passes a pod whose chamvi-tools has not started yet (nothing ran to judge)', async () => {
    const pending = () => {
      const pod = readyPod(undefined)();
      pod.status = {
        phase: 'Pending',
        initContainerStatuses: [
          { name: 'chamvi-tools', image: config.sandboxImage, imageID: '', restartCount: 0, ready: false, state: { waiting: {} } },
        ],
      };
      return pod;
    };
    await expect(transportFor(pending).transport.start(['serve'])).rejects.toThrow(PASSED);
  });
});

// The run's record gains what chamvi-tools ran (ranImageKey) only after the reconciler saw the
// kubelet's report, while the shape the transport holds was made once, from the run its sandbox's
// first job read: a copy of the image pulled later (the runtime then names it by another
// repository) must be judged by the record as it is now, not as that job read it.
describe("the exec transport reads the run's record again for what chamvi-tools ran (chamvi-tools@ran)", () => {
  const customRun: ParsedCodingRun = { ...run, spec: { ...run.spec, sandbox: { ...run.spec.sandbox, image: 'acme/builder:2' } } };
  const DIGEST = `sha256:${'d'.repeat(64)}`;
  const heldRecord = {
    uid: 'pod-uid-1',
    images: [
      { container: 'sandbox', image: 'acme/builder:2' },
      { container: 'chamvi-tools', image: config.sandboxImage },
    ],
  };
  const withRan = {
    ...heldRecord,
    images: [...heldRecord.images, { container: ranImageKey('chamvi-tools'), image: `docker.io/chamvi/sandbox@${DIGEST}` }],
  };

  /** The run's pod, Ready, its chamvi-tools now reported under another tenant's copy at the digest it ran. */
  const renamedPod = () => {
    const pod = buildSandboxPod(customRun, config);
    pod.metadata = { ...pod.metadata, uid: 'pod-uid-1', generation: 1 };
    pod.spec!.serviceAccountName = 'default';
    pod.status = {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
      initContainerStatuses: [
        {
          name: 'chamvi-tools',
          image: 'docker.io/a/copy:1',
          imageID: `docker.io/a/copy@${DIGEST}`,
          restartCount: 0,
          ready: true,
          state: { terminated: { exitCode: 0 } },
        },
      ],
      containerStatuses: [
        { name: 'sandbox', image: 'docker.io/acme/builder:2', imageID: '', restartCount: 0, ready: true, state: { running: {} } },
      ],
    };
    return pod;
  };

  const transportWith = (fresh: () => AdmittedImages | undefined, now: () => number = () => 1_000_000) => {
    let reads = 0;
    const { transport } = transportReading(renamedPod, {
      // Made from the run as the first job read it: before the @ran entry landed.
      expectedPodShape: sandboxPodShape({ ...customRun, status: { podName: 'x', admittedPod: heldRecord } }, config),
      now,
      readAdmittedImages: async () => {
        reads += 1;
        return fresh();
      },
    });
    return { transport, reads: () => reads };
  };

  it('reads the record again, finds what chamvi-tools ran, and passes the pod', async () => {
    const { transport, reads } = transportWith(() => admittedImagesOf({ admittedPod: withRan }));
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    await expect(transport.start(['serve'])).rejects.toThrow(PASSED);
    // Found, it is kept for the pod: no more reads of the run.
    expect(reads()).toBe(1);
  });

  it('refuses the pod reported at another digest than the one the record read again keeps', async () => {
    const other = {
      ...withRan,
      images: [
        ...heldRecord.images,
        { container: ranImageKey('chamvi-tools'), image: `docker.io/chamvi/sandbox@sha256:${'e'.repeat(64)}` },
      ],
    };
    const { transport, reads } = transportWith(() => admittedImagesOf({ admittedPod: other }));
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toMatchObject({ runFailure: true, reason: REASONS.SandboxInvalid });
    expect((error as Error).message).toContain('in container chamvi-tools');
    expect(reads()).toBe(1);
  });

  it('refuses the pod as before when the record read again has no entry for it, reading at most once per ADMITTED_RECORD_RETRY_MS', async () => {
    let now = 1_000_000;
    const { transport, reads } = transportWith(
      () => admittedImagesOf({ admittedPod: heldRecord }),
      () => now,
    );
    const error = await transport.start(['serve']).catch((thrown: unknown) => thrown);
    expect(refusal(error)).toEqual({
      runFailure: true,
      reason: REASONS.SandboxInvalid,
      message: expect.stringContaining('image docker.io/a/copy:1 (the kubelet ran it from this image'),
    });
    expect(reads()).toBe(1);
    now += ADMITTED_RECORD_RETRY_MS - 1;
    await transport.start(['serve']).catch(() => undefined);
    expect(reads()).toBe(1);
    now += 1;
    await transport.start(['serve']).catch(() => undefined);
    expect(reads()).toBe(2);
  });
});
