// Deletes name the object they mean by its uid: a run deleted and created again under its name
// between a decision and its DELETE (a person, a GitOps tool re-applying it) is a new run, and a
// DELETE by name alone took it with the old one. The API server answers a delete whose uid
// precondition names another object with 409 Conflict; the reconcilers take that as the object
// meant being gone. The gateways here hold objects by name and check the precondition as the API
// server does (test/integration/delete-preconditions.test.ts shows that it does).
import { describe, expect, it, vi } from 'vitest';
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { API_VERSION, FINALIZER, KIND, RUN_UID_LABEL, type CodingRun } from '../../operator/src/api/index.ts';
import type { CodingSchedule } from '../../operator/src/api/coding-schedule.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import { ScheduleReconciler } from '../../operator/src/controller/schedule-reconciler.ts';
import { isConflict } from '../../operator/src/kube/api-errors.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { ObjectMetadata } from '../../operator/src/kube/metadata-only.ts';
import type { ScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';
import { networkPolicyName } from '../../operator/src/reconcile/names.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../operator/src/reconcile/ownership.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);

/** A delete's uid precondition as the API server checks it. */
function preconditionFailed(uid: string, held: string | undefined) {
  return Object.assign(new Error(`Precondition failed: UID in precondition: ${uid}, UID in object meta: ${held}`), { code: 409 });
}

/** A run that succeeded an hour ago and is deleted at once (ttlSecondsAfterFinished: 0). */
const finished = (uid: string) =>
  codingRunFixture({
    metadata: { uid, resourceVersion: '5' },
    spec: { ttlSecondsAfterFinished: 0 },
    status: {
      phase: 'Succeeded',
      reason: 'Completed',
      completionTime: '2026-11-29T11:00:00Z',
      observedGeneration: 1,
      podName: 'fix-sandbox',
      // Accepted, as any run that ran: only such a run is recorded before its TTL delete.
      conditions: [
        { type: 'Accepted', status: 'True', reason: 'Valid', message: 'The run is valid.', lastTransitionTime: '2026-11-29T10:00:00Z' },
      ],
    } as CodingRun['status'],
  });

/** The run's sandbox pod as the pod cache last showed it. */
const sandboxPod = (runUid: string, uid: string): V1Pod => ({
  metadata: {
    name: 'fix-sandbox',
    namespace: 'agents',
    uid,
    labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run-uid': runUid },
    ownerReferences: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: 'fix', uid: runUid, controller: true }],
  },
  status: { phase: 'Running' },
});

/**
 * A RunReconciler over caches that show `run` (and `pod`), and an API server that holds objects
 * by name: `server` is what it holds now, which the caches may not show yet.
 */
function runScene(run: CodingRun, pod?: V1Pod, configMaps: ObjectMetadata[] = [], policies: V1NetworkPolicy[] = []) {
  const server = {
    runs: new Map([[run.metadata.name, run]]),
    pods: new Map(pod ? [[pod.metadata!.name!, pod]] : []),
    configMaps: new Map<string, ObjectMetadata>(configMaps.map((configMap) => [configMap.metadata!.name!, configMap])),
    networkPolicies: new Map<string, V1NetworkPolicy>(policies.map((policy) => [policy.metadata!.name!, policy])),
  };
  const kube = {
    getRun: vi.fn(async (_namespace: string, name: string) => server.runs.get(name)),
    replaceRunStatus: vi.fn(async (stored: CodingRun) => stored),
    recordFinishedRun: vi.fn(async () => {}),
    deleteRun: vi.fn(async (_namespace: string, name: string, uid?: string) => {
      const held = server.runs.get(name);
      if (held && uid !== undefined && held.metadata.uid !== uid) throw preconditionFailed(uid, held.metadata.uid);
      server.runs.delete(name);
    }),
    deletePod: vi.fn(async (_namespace: string, name: string, uid?: string) => {
      const held = server.pods.get(name);
      if (held && uid !== undefined && held.metadata!.uid !== uid) throw preconditionFailed(uid, held.metadata!.uid);
      server.pods.delete(name);
    }),
    deleteConfigMap: vi.fn(async (_namespace: string, name: string, uid?: string) => {
      const held = server.configMaps.get(name);
      if (held && uid !== undefined && held.metadata!.uid !== uid) throw preconditionFailed(uid, held.metadata!.uid);
      server.configMaps.delete(name);
    }),
    deleteNetworkPolicy: vi.fn(async (_namespace: string, name: string, uid?: string) => {
      const held = server.networkPolicies.get(name);
      if (held && uid !== undefined && held.metadata!.uid !== uid) throw preconditionFailed(uid, held.metadata!.uid);
      server.networkPolicies.delete(name);
    }),
    createEvent: vi.fn(async () => {}),
  };
  const reconciler = new RunReconciler({
    caches: {
      runs: new MemoryCache([run]),
      pods: new MemoryCache<V1Pod>(pod ? [pod] : []),
      networkPolicies: new MemoryCache<V1NetworkPolicy>(policies),
      configMaps: new MemoryCache<ObjectMetadata>(configMaps),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: kube as unknown as KubeGateway,
    agent: idleAgent,
    events: { record: async () => {} } as unknown as EventRecorder,
    config,
    logger: { info: () => {}, warn: () => {} },
    now: () => NOW,
  });
  return { reconciler, kube, server };
}

describe("a finished run's TTL delete", () => {
  it('deletes the run it decided on, by its uid', async () => {
    const { reconciler, kube, server } = runScene(finished('uid-old'));
    await reconciler.reconcile('agents/fix');
    expect(kube.deleteRun).toHaveBeenCalledWith('agents', 'fix', 'uid-old');
    expect(server.runs.has('fix')).toBe(false);
  });

  it('leaves a run created again under the name while its record was being kept, and takes the 409 as the old one gone', async () => {
    const { reconciler, kube, server } = runScene(finished('uid-old'));
    // The two ConfigMap requests of the record are the window: someone deletes the run and applies it again.
    kube.recordFinishedRun.mockImplementationOnce(async () => {
      server.runs.set('fix', codingRunFixture({ metadata: { uid: 'uid-new' } }));
    });
    await expect(reconciler.reconcile('agents/fix')).resolves.toEqual({});
    expect(server.runs.get('fix')?.metadata.uid).toBe('uid-new');
    expect(kube.deleteRun).toHaveBeenCalledTimes(1);
    // Gone is gone: the reconcile does not read the name again to decide about the new run.
    expect(kube.getRun).not.toHaveBeenCalled();
  });
});

describe("a finished run's sandbox pod", () => {
  it('is deleted as the cache showed it; a pod made again under its name since stays, and the 409 ends nothing', async () => {
    const run = finished('uid-old');
    const { reconciler, kube, server } = runScene(
      { ...run, spec: { ...run.spec, ttlSecondsAfterFinished: 3600 } },
      sandboxPod('uid-old', 'pod-1'),
    );
    server.pods.set('fix-sandbox', sandboxPod('uid-other', 'pod-2'));
    await expect(reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(kube.deletePod).toHaveBeenCalledWith('agents', 'fix-sandbox', 'pod-1');
    expect(server.pods.get('fix-sandbox')?.metadata?.uid).toBe('pod-2');
  });
});

describe("a deleted run's ConfigMaps", () => {
  it('are deleted as the cache showed them; a ConfigMap made again under the name without the run as owner stays, and the 409 ends nothing', async () => {
    const run = finished('uid-old');
    const deleting = { ...run, metadata: { ...run.metadata, deletionTimestamp: '2026-11-29T12:00:00Z', finalizers: [FINALIZER] } };
    const diff: ObjectMetadata = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'fix-diff',
        namespace: 'agents',
        uid: 'cm-1',
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: 'uid-old' },
        ownerReferences: [{ apiVersion: API_VERSION, kind: KIND, name: 'fix', uid: 'uid-old', controller: true }],
      },
    };
    const { reconciler, kube, server } = runScene(deleting, undefined, [diff]);
    // Deleted and made again by someone else since the cache saw it: not the run's.
    server.configMaps.set('fix-diff', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'fix-diff', namespace: 'agents', uid: 'cm-2' },
    });
    await expect(reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(kube.deleteConfigMap).toHaveBeenCalledWith('agents', 'fix-diff', 'cm-1');
    expect(server.configMaps.get('fix-diff')?.metadata?.uid).toBe('cm-2');
  });
});

describe("a finished run's own NetworkPolicy", () => {
  const name = networkPolicyName(finished('uid-old'));
  /** The per-run policy earlier builds made, as the policy cache last showed it. */
  const runPolicy = (runUid: string, uid: string): V1NetworkPolicy => ({
    metadata: {
      name,
      namespace: 'agents',
      uid,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: runUid },
      ownerReferences: [{ apiVersion: API_VERSION, kind: KIND, name: 'fix', uid: runUid, controller: true }],
    },
    spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'] },
  });
  const stopped = () => {
    const run = finished('uid-old');
    return { ...run, spec: { ...run.spec, ttlSecondsAfterFinished: 3600 } };
  };

  it('is deleted as the cache showed it; a policy made again under its name since stays, and the 409 ends nothing', async () => {
    const { reconciler, kube, server } = runScene(stopped(), undefined, [], [runPolicy('uid-old', 'np-1')]);
    // Deleted and made again by someone else since the cache saw it: not the run's.
    server.networkPolicies.set(name, runPolicy('uid-other', 'np-2'));
    await expect(reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(kube.deleteNetworkPolicy).toHaveBeenCalledWith('agents', name, 'np-1');
    expect(server.networkPolicies.get(name)?.metadata?.uid).toBe('np-2');
  });

  it('is deleted by the uid the cache showed when nothing took its name', async () => {
    const { reconciler, kube, server } = runScene(stopped(), undefined, [], [runPolicy('uid-old', 'np-1')]);
    await expect(reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(kube.deleteNetworkPolicy).toHaveBeenCalledWith('agents', name, 'np-1');
    expect(server.networkPolicies.has(name)).toBe(false);
  });
});

describe("a schedule's history limit", () => {
  const schedule = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingSchedule',
    metadata: { name: 'nightly', namespace: 'team', uid: 'uid-nightly', generation: 1, creationTimestamp: '2026-06-01T10:00:00Z' },
    spec: {
      schedule: '0 0 1 1 *',
      successfulRunsHistoryLimit: 0,
      runTemplate: {
        spec: {
          task: 'Update dependencies',
          repository: { url: 'https://github.com/acme/app.git' },
          model: { provider: 'scripted', scriptRef: { name: 's' } },
        },
      },
    },
  } as unknown as CodingSchedule;
  // As the schedule made it (runs-of-schedule.ts): its run spec and its scheduled-at annotation.
  const scheduledRun = (uid: string): CodingRun =>
    codingRunFixture({
      spec: (schedule.spec as { runTemplate: { spec: Record<string, unknown> } }).runTemplate.spec,
      metadata: {
        name: 'nightly-a1b2c',
        namespace: 'team',
        uid,
        labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': '1780300800' },
        annotations: { 'chamvi.dev/scheduled-at': '2026-06-01T08:00:00.000Z' },
        ownerReferences: [
          { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', name: 'nightly', uid: 'uid-nightly', controller: true },
        ],
      } as Partial<CodingRun['metadata']>,
      status: { phase: 'Succeeded', completionTime: '2026-06-01T10:05:00Z' } as CodingRun['status'],
    });

  function scheduleScene() {
    const server = new Map([['nightly-a1b2c', scheduledRun('uid-listed')]]);
    const kube = {
      getSchedule: vi.fn(async () => schedule),
      getTemplate: vi.fn(async () => undefined),
      listScheduleRuns: vi.fn(async () => [...server.values()]),
      createRun: vi.fn(async (run: object) => run as CodingRun),
      deleteRun: vi.fn(async (_namespace: string, name: string, uid?: string) => {
        const held = server.get(name);
        if (held && uid !== undefined && held.metadata.uid !== uid) throw preconditionFailed(uid, held.metadata.uid);
        server.delete(name);
      }),
      replaceScheduleStatus: vi.fn(async (current: CodingSchedule) => current),
    };
    const reconciler = new ScheduleReconciler({
      kube: kube as unknown as ScheduleGateway,
      events: { record: async () => {} },
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      now: () => new Date('2026-06-01T10:30:00Z'),
    });
    return { reconciler, kube, server };
  }

  it('deletes a finished run past it by the uid it was listed with', async () => {
    const { reconciler, kube, server } = scheduleScene();
    await reconciler.reconcile('team/nightly');
    expect(kube.deleteRun).toHaveBeenCalledWith('team', 'nightly-a1b2c', 'uid-listed');
    expect(server.has('nightly-a1b2c')).toBe(false);
  });

  it('leaves a run created again under its name since the list, and goes on to write its status', async () => {
    const { reconciler, kube, server } = scheduleScene();
    kube.listScheduleRuns.mockImplementationOnce(async () => {
      const listed = [...server.values()];
      server.set('nightly-a1b2c', scheduledRun('uid-new'));
      return listed;
    });
    await expect(reconciler.reconcile('team/nightly')).resolves.toBeDefined();
    expect(server.get('nightly-a1b2c')?.metadata.uid).toBe('uid-new');
    expect(kube.replaceScheduleStatus).toHaveBeenCalledTimes(1);
  });
});

describe('MemoryKubeGateway (local mode) checks a delete uid precondition as the API server does', () => {
  const gateway = () =>
    new MemoryKubeGateway(
      codingRunFixture({ metadata: { uid: 'uid-1', finalizers: [] } }),
      { configMaps: new Map(), secrets: new Map() },
      () => {},
    );

  it('answers 409 Conflict to a run delete naming another uid, and keeps the run', async () => {
    const memory = gateway();
    const refused = await memory.deleteRun('agents', 'fix', 'uid-0').catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(memory.current()?.metadata.uid).toBe('uid-1');
    await memory.deleteRun('agents', 'fix', 'uid-1');
    expect(memory.current()).toBeUndefined();
  });

  it('answers 409 Conflict to a pod delete naming another uid, and deletes by the pod own uid', async () => {
    const memory = gateway();
    await memory.createPod({ metadata: { name: 'fix-sandbox', namespace: 'agents' } });
    const uid = memory.caches().pods.get('agents', 'fix-sandbox')!.metadata!.uid!;
    expect(uid).toBeTruthy();
    const refused = await memory.deletePod('agents', 'fix-sandbox', 'pod-0').catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(memory.caches().pods.get('agents', 'fix-sandbox')).toBeDefined();
    await memory.deletePod('agents', 'fix-sandbox', uid);
    expect(memory.caches().pods.get('agents', 'fix-sandbox')).toBeUndefined();
  });
});
