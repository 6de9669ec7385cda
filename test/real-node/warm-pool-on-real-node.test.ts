// Warm pool isolation on a real kubelet + containerd node with kube-router enforcing
// NetworkPolicy: a pool pod built by the operator's own functions reaches a server on the
// node's bridge without a policy (the control case), not once its pool's deny-all applies,
// and still not once it is claimed for a run (the claim patch as the operator sends it, the
// namespace's sandbox deny-all made first); with the pool's policy gone the namespace's still
// holds it, and only with both gone does the connection succeed again: the policies, not
// something else, blocked it.
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { stringify } from 'yaml';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { sandboxDenyAllPolicy } from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { claimPatch, warmPoolNetworkPolicy, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { createNamespace, deleteNamespace, kubectl, kubectlOk } from '../support/cluster.ts';
import { connectFrom, until, type SandboxPod } from '../support/real-node/egress-probes.ts';
import { realNodeLabel, realNodeTaint } from '../support/real-node/real-node.ts';

const unavailable = inject('realNodeUnavailable');
const namespace = `warm-real-${process.pid}`;
const pool: WarmPoolConfig = { name: 'pool', namespace, size: 1 };

describe.skipIf(unavailable !== '')(`a warm pool pod on a real node${unavailable ? ` (SKIPPED: ${unavailable})` : ''}`, () => {
  const bridgeIp = inject('realNodeBridgeIp');
  let server: Server;
  let port = 0;
  const pod: SandboxPod = { namespace, name: '' };
  let run: ParsedCodingRun;
  const connect = () => connectFrom(pod, bridgeIp, port);

  beforeAll(async () => {
    await createNamespace(namespace, { restricted: true });
    server = createServer((socket) => socket.end());
    // All addresses: the bridge appears only with the first pod.
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '0.0.0.0', () => resolve());
    });
    port = (server.address() as { port: number }).port;
    const config = loadOperatorConfig(
      {
        sandboxImage: inject('realNodeSandboxImage'),
        sandboxPlacement: {
          nodeSelector: { [realNodeLabel.key]: realNodeLabel.value },
          tolerations: [{ key: realNodeTaint.key, operator: 'Equal', value: realNodeTaint.value, effect: realNodeTaint.effect }],
        },
      },
      {},
    );
    // A real run object: the claim makes it the pod's owner, and the garbage collector deletes a pod whose owner is gone.
    const manifest = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'claimer', namespace },
      spec: { task: 'probe', repository: { url: 'https://github.com/acme/x' }, model: { provider: 'scripted', scriptRef: { name: 's' } } },
    };
    await kubectlOk(['apply', '-f', '-'], { input: stringify(manifest) });
    const uid = (await kubectlOk(['get', 'codingrun', 'claimer', '-n', namespace, '-o', 'jsonpath={.metadata.uid}'])).trim();
    run = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'claimer', namespace, uid },
      spec: codingRunSpec.parse(manifest.spec),
    };
    const created = await kubectlOk(['create', '-o', 'jsonpath={.metadata.name}', '-f', '-'], {
      input: JSON.stringify(warmPoolPod(pool, config, run)),
    });
    pod.name = created.trim();
    const ready = await kubectl(['wait', '-n', namespace, `pod/${pod.name}`, '--for=condition=Ready', '--timeout=120s'], {
      timeoutMs: 130_000,
    });
    if (ready.code !== 0)
      throw new Error(`pod not Ready: ${ready.stderr}\n${(await kubectl(['describe', 'pod', '-n', namespace, pod.name])).stdout}`);
    // Control case: no policy yet (the order the pool loop never uses), the server answers.
    expect(await until(connect, (o) => o === 'connected')).toBe('connected');
  }, 300_000);

  afterAll(async () => {
    server?.close();
    await deleteNamespace(namespace);
  });

  it("has no network once its pool's deny-all applies", async () => {
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(warmPoolNetworkPolicy(pool)) });
    expect(await until(connect, (o) => o !== 'connected')).not.toBe('connected');
  });

  it("claimed for a run (the namespace's deny-all first), still none; with the pool's policy gone the namespace's holds it", async () => {
    const runPolicy = sandboxDenyAllPolicy(namespace);
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(runPolicy) });
    const uid = (await kubectlOk(['get', 'pod', pod.name, '-n', namespace, '-o', 'jsonpath={.metadata.uid}'])).trim();
    await kubectlOk(['patch', 'pod', pod.name, '-n', namespace, '--type=json', '-p', JSON.stringify(claimPatch(run, pool, 600, uid))]);
    expect(await connect()).not.toBe('connected');
    await kubectlOk(['delete', 'networkpolicy', '-n', namespace, warmPoolNetworkPolicy(pool).metadata!.name!]);
    // Give kube-router the time it took to apply a policy above: the namespace's deny-all must keep it closed.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await connect()).not.toBe('connected');
    await kubectlOk(['delete', 'networkpolicy', '-n', namespace, runPolicy.metadata!.name!]);
    expect(await until(connect, (o) => o === 'connected')).toBe('connected');
  }, 120_000);
});
