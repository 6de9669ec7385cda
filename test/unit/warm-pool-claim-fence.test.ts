// The fence after a claim of a warm pool pod got no answer: against a pod store that applies
// patches and deletes one at a time as the API server does (resourceVersion bumped by each
// write, JSON Patch tests, delete preconditions), a claim patch that lands after the fence
// claims nothing, and one that landed before it is found.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { fenceUnansweredClaim } from '../../operator/src/controller/warm-pool-claim-fence.ts';
import type { WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { isOwnedByRun } from '../../operator/src/reconcile/ownership.ts';
import { POOL_ISOLATION_LABEL, WARM_POOL_LABEL, claimPatch, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { JsonPatchTestFailed, applyAsApiServer } from '../support/api-server-json-patch.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const pool: WarmPoolConfig = { name: 'pool', namespace: 'team', size: 1 };
const run: ParsedCodingRun = (() => {
  const fixture = codingRunFixture({ metadata: { name: 'r', namespace: pool.namespace, uid: 'uid-r' } });
  return { ...fixture, spec: codingRunSpec.parse(fixture.spec) };
})();

/** One pool pod as the API server keeps it; `down` fails every request with that status. */
function apiServer() {
  let pod: V1Pod | undefined = {
    metadata: {
      name: 'pool-warm-a',
      namespace: pool.namespace,
      uid: 'uid-a',
      resourceVersion: '1',
      labels: { [WARM_POOL_LABEL]: pool.name, [POOL_ISOLATION_LABEL]: pool.name },
    },
    spec: { containers: [{ name: 'sandbox', image: 'sandbox:1' }] },
  };
  let version = 1;
  const server = {
    down: undefined as number | undefined,
    get pod() {
      return pod;
    },
    /** The claim patch as the API server applies it, whenever it reaches etcd. */
    applyClaim(patch: object[]) {
      const patched = applyAsApiServer(pod!, patch);
      pod = { ...patched, metadata: { ...patched.metadata, resourceVersion: String(++version) } };
    },
  };
  const fail = () => {
    if (server.down) throw Object.assign(new Error('etcdserver: request timed out'), { code: server.down });
  };
  // As kubernetesWarmPoolGateway: a delete answered 404 or 409 is done.
  const gateway: Pick<WarmPoolGateway, 'deletePod' | 'readPod'> = {
    async deletePod(_namespace, _name, seen) {
      fail();
      if (!pod) return;
      if (seen?.uid !== pod.metadata!.uid || seen?.resourceVersion !== pod.metadata!.resourceVersion) return;
      // Graceful: the pod stays, being deleted, a write of its own.
      pod = { ...pod, metadata: { ...pod.metadata, deletionTimestamp: new Date(), resourceVersion: String(++version) } };
    },
    async readPod() {
      fail();
      return pod;
    },
  };
  return { server, gateway };
}

const owned = (pod: V1Pod) => isOwnedByRun(pod, run);

describe('fenceUnansweredClaim', () => {
  it('leaves no claim that lands after it: the pool pod is deleted and the late claim fails its test', async () => {
    const { server, gateway } = apiServer();
    const seen = server.pod!;
    const patch = claimPatch(run, pool, 600, 'uid-a', { resourceVersion: '1' });
    expect(await fenceUnansweredClaim(gateway, seen, owned)).toEqual({ fenced: true });
    expect(server.pod!.metadata!.deletionTimestamp).toBeDefined();
    expect(() => server.applyClaim(patch)).toThrow(JsonPatchTestFailed);
    expect(owned(server.pod!)).toBe(false);
  });

  it('finds the claim that landed before it: the pod is not deleted, and is the run’s', async () => {
    const { server, gateway } = apiServer();
    const seen = server.pod!;
    server.applyClaim(claimPatch(run, pool, 600, 'uid-a', { resourceVersion: '1' }));
    const fenced = await fenceUnansweredClaim(gateway, seen, owned);
    expect('claimed' in fenced && owned(fenced.claimed)).toBe(true);
    expect(server.pod!.metadata!.deletionTimestamp).toBeUndefined();
  });

  it('throws while the API server answers the delete with a 5xx too: the claim may still land, and the reconcile is retried', async () => {
    const { server, gateway } = apiServer();
    server.down = 504;
    await expect(fenceUnansweredClaim(gateway, server.pod!, owned)).rejects.toThrow('etcdserver: request timed out');
  });

  it('refuses to fence without a resourceVersion, which alone keeps the delete off a pod claimed since', async () => {
    const { server, gateway } = apiServer();
    const seen = { ...server.pod!, metadata: { ...server.pod!.metadata, resourceVersion: undefined } };
    await expect(fenceUnansweredClaim(gateway, seen, owned)).rejects.toThrow(/no uid or resourceVersion/);
    expect(server.pod!.metadata!.deletionTimestamp).toBeUndefined();
  });
});
