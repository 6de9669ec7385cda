// An in-memory API server for one local run: the KubeGateway port that the reconciler, the
// status writer and the event recorder use, over the run, its "pod" and the objects from
// the manifest. It keeps the guarantees they rely on: a stale resourceVersion is a 409
// conflict, a JSON Patch test that fails is a 422, a deleted object is gone, a delete whose uid
// precondition names another object is a 409 (and deletes nothing). A created pod
// is Ready at once (the local sandbox needs no scheduling); Events go to a callback; every
// change resolves changed(), which is what the local loop waits on instead of a watch.
import { randomUUID } from 'node:crypto';
import type { CoreV1Event, V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { CodingRun, CodingRunStatus } from '../../api/index.ts';
import type { CreateAnswer, KubeGateway, NameHolder, SecretKeysAndLabels } from '../../kube/kube-gateway.ts';
import type { ObjectCache, ReconcilerCaches } from '../../controller/run-reconciler.ts';
import { applyJsonPatch } from './json-patch.ts';
import type { ManifestObjects } from './manifest-file.ts';

class ApiError extends Error {
  constructor(
    readonly code: 404 | 409,
    message: string,
  ) {
    super(message);
  }
}

/** A delete's uid precondition, as the API server checks it: another object at the name is a 409 Conflict. */
function requireUid(resource: string, object: { metadata?: { name?: string; uid?: string } }, uid: string | undefined): void {
  if (uid === undefined || object.metadata?.uid === uid) return;
  throw new ApiError(
    409,
    `Operation cannot be fulfilled on ${resource} "${object.metadata?.name}": Precondition failed: UID in precondition: ${uid}, UID in object meta: ${object.metadata?.uid ?? ''}`,
  );
}

export class MemoryKubeGateway implements KubeGateway {
  private run: CodingRun | undefined;
  private version: number;
  private readonly pods = new Map<string, V1Pod>();
  private readonly networkPolicies = new Map<string, V1NetworkPolicy>();
  private readonly configMaps = new Map<string, V1ConfigMap>();
  private readonly secrets: Map<string, Record<string, string>>;
  private readonly secretLabels: Map<string, Record<string, string>>;
  private wake: Array<() => void> = [];

  constructor(
    run: CodingRun,
    objects: ManifestObjects,
    private readonly onEvent: (event: CoreV1Event) => void,
  ) {
    this.run = structuredClone(run);
    this.version = Number(run.metadata.resourceVersion ?? '1') || 1;
    this.run.metadata.resourceVersion = String(this.version);
    this.secrets = new Map(objects.secrets);
    this.secretLabels = new Map(objects.secretLabels);
    for (const [name, { data, binaryData }] of objects.configMaps) {
      this.configMaps.set(name, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: run.metadata.namespace, uid: randomUUID() },
        data,
        binaryData,
      });
    }
  }

  private get namespace(): string {
    return this.run?.metadata.namespace ?? '';
  }

  /** The run as stored now (a copy), or undefined once deleted. */
  current(): CodingRun | undefined {
    return this.run && structuredClone(this.run);
  }

  /** Resolves at the next change of anything stored. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.wake.push(resolve));
  }

  private touched(): void {
    const waiting = this.wake;
    this.wake = [];
    for (const resolve of waiting) resolve();
  }

  private requireRun(namespace: string, name: string): CodingRun {
    if (!this.run || this.run.metadata.namespace !== namespace || this.run.metadata.name !== name) {
      throw new ApiError(404, `codingruns.chamvi.dev "${name}" not found`);
    }
    return this.run;
  }

  /** Stores a changed run under a new resourceVersion, guarded by the one the writer read. */
  private store(next: CodingRun, readVersion: string | undefined): CodingRun {
    const stored = this.requireRun(next.metadata.namespace, next.metadata.name);
    if (readVersion !== undefined && readVersion !== stored.metadata.resourceVersion) {
      throw new ApiError(
        409,
        `Operation cannot be fulfilled on codingruns.chamvi.dev "${next.metadata.name}": the object has been modified`,
      );
    }
    this.version += 1;
    this.run = structuredClone({ ...next, metadata: { ...next.metadata, resourceVersion: String(this.version) } });
    if (this.run.metadata.deletionTimestamp && !this.run.metadata.finalizers?.length) this.run = undefined;
    this.touched();
    return structuredClone(this.run ?? next);
  }

  secretValue(namespace: string, name: string, key: string): string | undefined {
    return namespace === this.namespace ? this.secrets.get(name)?.[key] : undefined;
  }

  /** A Secret's labels, or undefined when there is no such Secret. */
  secretLabelsOf(namespace: string, name: string): Record<string, string> | undefined {
    if (namespace !== this.namespace || !this.secrets.has(name)) return undefined;
    return { ...this.secretLabels.get(name) };
  }

  configMap(namespace: string, name: string): V1ConfigMap | undefined {
    return namespace === this.namespace ? structuredClone(this.configMaps.get(name)) : undefined;
  }

  /**
   * Creates or replaces a ConfigMap. Its uid is the API server's: kept by a replace, new for a
   * ConfigMap made where none was (what a delete's uid precondition names).
   */
  putConfigMap(configMap: V1ConfigMap): void {
    if (configMap.metadata?.namespace !== this.namespace || !configMap.metadata.name) return;
    const held = this.configMaps.get(configMap.metadata.name);
    const stored = structuredClone(configMap);
    stored.metadata = { ...stored.metadata, uid: held?.metadata?.uid ?? randomUUID() };
    this.configMaps.set(configMap.metadata.name, stored);
    this.touched();
  }

  caches(): ReconcilerCaches {
    const cache = <T extends { metadata?: { name?: string } }>(objects: () => Map<string, T>): ObjectCache<T> => ({
      get: (namespace, name) => (namespace === this.namespace ? objects().get(name) : undefined),
      list: () => [...objects().values()].map((object) => ({ ...object, metadata: { ...object.metadata, namespace: this.namespace } })),
    });
    return {
      runs: {
        get: (namespace, name) =>
          this.run?.metadata.namespace === namespace && this.run.metadata.name === name ? this.current() : undefined,
        list: () => (this.run ? [this.current()!] : []),
      },
      pods: cache(() => this.pods),
      networkPolicies: cache(() => this.networkPolicies),
      configMaps: cache(() => this.configMaps),
      finishedRuns: cache(() => this.configMaps),
    };
  }

  async getRun(namespace: string, name: string): Promise<CodingRun | undefined> {
    return this.run?.metadata.namespace === namespace && this.run.metadata.name === name ? this.current() : undefined;
  }

  async replaceRunStatus(run: CodingRun, status: CodingRunStatus): Promise<CodingRun> {
    const stored = this.requireRun(run.metadata.namespace, run.metadata.name);
    return this.store({ ...stored, status: structuredClone(status) }, run.metadata.resourceVersion);
  }

  async patchRunStatus(namespace: string, name: string, operations: object[]): Promise<CodingRun> {
    const stored = this.requireRun(namespace, name);
    // Only the status subresource changes; tests may look at anything.
    const patched = applyJsonPatch(stored, operations);
    return this.store({ ...stored, ...(patched.status ? { status: patched.status } : {}) }, undefined);
  }

  async setRunFinalizers(run: CodingRun, finalizers: string[]): Promise<CodingRun> {
    const stored = this.requireRun(run.metadata.namespace, run.metadata.name);
    return this.store({ ...stored, metadata: { ...stored.metadata, finalizers } }, run.metadata.resourceVersion);
  }

  /** A local run is one run, never applied again: nothing to remember. */
  async recordFinishedRun(): Promise<void> {}

  async deleteRun(namespace: string, name: string, uid: string): Promise<void> {
    if (!this.run || this.run.metadata.namespace !== namespace || this.run.metadata.name !== name) return;
    requireUid('codingruns.chamvi.dev', this.run, uid);
    this.store(
      {
        ...this.run,
        metadata: { ...this.run.metadata, deletionTimestamp: this.run.metadata.deletionTimestamp ?? new Date().toISOString() },
      },
      undefined,
    );
  }

  async createPod(pod: V1Pod): Promise<CreateAnswer<V1Pod>> {
    const name = pod.metadata?.name;
    if (!name) return { holder: undefined };
    if (this.pods.has(name)) return { holder: this.pods.get(name) as NameHolder };
    // With a uid of its own, as the API server stores it: what a delete's precondition names.
    const stored = structuredClone(pod);
    stored.metadata = { ...stored.metadata, uid: randomUUID() };
    const created = { ...stored, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } };
    this.pods.set(name, created);
    this.touched();
    return { created: structuredClone(created) };
  }

  async deletePod(namespace: string, name: string, uid?: string): Promise<void> {
    const pod = namespace === this.namespace ? this.pods.get(name) : undefined;
    if (!pod) return;
    requireUid('pods', pod, uid);
    this.pods.delete(name);
    this.touched();
  }

  async createNetworkPolicy(policy: V1NetworkPolicy): Promise<V1NetworkPolicy | undefined> {
    const name = policy.metadata?.name;
    if (!name) return undefined;
    if (this.networkPolicies.has(name)) return structuredClone(this.networkPolicies.get(name));
    // With a uid of its own, as createPod's pod: what a delete's precondition names.
    const stored = structuredClone(policy);
    stored.metadata = { ...stored.metadata, uid: randomUUID() };
    this.networkPolicies.set(name, stored);
    this.touched();
    return undefined;
  }

  async replaceNetworkPolicy(policy: V1NetworkPolicy): Promise<void> {
    const name = policy.metadata?.name;
    const held = name ? this.networkPolicies.get(name) : undefined;
    if (!name || !held) return;
    // A replace keeps the object, and so its uid.
    const stored = structuredClone(policy);
    stored.metadata = { ...stored.metadata, uid: held.metadata?.uid ?? randomUUID() };
    this.networkPolicies.set(name, stored);
    this.touched();
  }

  async deleteNetworkPolicy(namespace: string, name: string, uid?: string): Promise<void> {
    const policy = namespace === this.namespace ? this.networkPolicies.get(name) : undefined;
    if (!policy) return;
    requireUid('networkpolicies.networking.k8s.io', policy, uid);
    this.networkPolicies.delete(name);
    this.touched();
  }

  async deleteConfigMap(namespace: string, name: string, uid?: string): Promise<void> {
    const configMap = namespace === this.namespace ? this.configMaps.get(name) : undefined;
    if (!configMap) return;
    requireUid('configmaps', configMap, uid);
    this.configMaps.delete(name);
    this.touched();
  }

  async secretKeysAndLabels(namespace: string, name: string): Promise<SecretKeysAndLabels | undefined> {
    const values = namespace === this.namespace ? this.secrets.get(name) : undefined;
    return values && { keys: Object.keys(values), labels: { ...this.secretLabels.get(name) } };
  }

  async configMapKeys(namespace: string, name: string): Promise<string[] | undefined> {
    const configMap = namespace === this.namespace ? this.configMaps.get(name) : undefined;
    return configMap && Object.keys({ ...configMap.data, ...configMap.binaryData });
  }

  async createEvent(event: CoreV1Event): Promise<void> {
    this.onEvent(event);
  }
}
