// The shared Sandbox contract (test/support/sandbox-contract.ts) against the operator's own
// sandbox pod from the sandbox image, on the real node: the toolbox bundled in the image, run
// by exec through the API server, the kubelet and containerd's CRI streaming, one exec per call
// and as a kept `serve` session. The same suite runs against kwok in
// test/integration/kubernetes-sandbox.contract.test.ts, where the toolbox is a process here.
//
// Every contract test gets a fresh pod, as there. A real pod takes seconds to start, so the
// next ones are started while a test runs (POOL_AHEAD) and each is deleted when its test ends.
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SANDBOX_CONTAINER } from '../../operator/src/reconcile/sandbox-pod.ts';
import { createKubernetesSandbox } from '../../operator/src/sandbox/kubernetes-sandbox.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl } from '../support/cluster.ts';
import { realNodeOperatorConfig, realNodeSandboxPod } from '../support/real-node/sandbox-pods.ts';
import { describeSandboxContract } from '../support/sandbox-contract.ts';

const unavailable = inject('realNodeUnavailable');
const namespace = `real-node-contract-${process.pid}`;
const POOL_AHEAD = 2;

let kubeConfig: KubeConfig;
let podCount = 0;
const pool: Array<Promise<string>> = [];

/** Creates a sandbox pod on the real node and resolves with its name once it is Ready. */
async function readyPod(): Promise<string> {
  podCount += 1;
  const uid = `00000000-0000-4000-8000-${String(podCount).padStart(12, '0')}`;
  const pod = realNodeSandboxPod(namespace, `contract-${podCount}`, uid, inject('realNodeSandboxImage'));
  const name = pod.metadata!.name!;
  const created = await kubectl(['create', '-f', '-'], { input: JSON.stringify(pod) });
  if (created.code !== 0) throw new Error(`pod ${name}: ${created.stderr}`);
  const ready = await kubectl(['wait', '-n', namespace, `pod/${name}`, '--for=condition=Ready', '--timeout=120s'], { timeoutMs: 130_000 });
  if (ready.code !== 0) throw new Error(`pod ${name} not Ready: ${ready.stderr}`);
  const node = await kubectl(['get', 'pod', '-n', namespace, name, '-o', 'jsonpath={.spec.nodeName}']);
  if (node.stdout !== inject('realNodeName')) throw new Error(`pod ${name} is on ${node.stdout}, not the real node`);
  return name;
}

/** The next Ready pod, keeping POOL_AHEAD more starting. */
function takePod(): Promise<string> {
  while (pool.length < POOL_AHEAD + 1) {
    const started = readyPod();
    started.catch(() => undefined); // reported when taken
    pool.push(started);
  }
  return pool.shift()!;
}

async function deletePod(name: string): Promise<void> {
  await kubectl(['delete', 'pod', name, '-n', namespace, '--wait=false', '--ignore-not-found', '--grace-period=0', '--force']);
}

describe.skipIf(unavailable !== '')(`the Sandbox contract on the real node${unavailable ? ` (SKIPPED: ${unavailable})` : ''}`, () => {
  beforeAll(async () => {
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath());
    await createNamespace(namespace, { restricted: true });
  });

  afterAll(async () => {
    await Promise.allSettled(pool);
    await deleteNamespace(namespace);
  });

  it('runs the toolbox of the image, in the container (the contract below is about that toolbox)', async () => {
    const podName = await takePod();
    const sandbox = createKubernetesSandbox({
      kubeConfig,
      namespace,
      podName,
      container: SANDBOX_CONTAINER,
      toolboxCommand: realNodeOperatorConfig(inject('realNodeSandboxImage')).toolboxCommand,
      mode: 'call',
    });
    try {
      const result = await sandbox.call({
        tool: 'bash',
        input: { command: 'id -u; cat /etc/hostname; echo "$CHAMVI_WORKSPACE"; tr "\\0" " " < /proc/$PPID/cmdline' },
      });
      expect(result.ok && result.result).toMatchObject({
        exitCode: 0,
        stdout: `1000\n${podName}\n/workspace\n/opt/chamvi/node /opt/chamvi/toolbox.mjs call `,
      });
    } finally {
      await sandbox.close();
      await deletePod(podName);
    }
  });

  for (const mode of ['call', 'serve'] as const) {
    describeSandboxContract(
      `real node, Kubernetes exec (${mode})`,
      async (options) => {
        const podName = await takePod();
        const sandbox = createKubernetesSandbox({
          kubeConfig,
          namespace,
          podName,
          container: SANDBOX_CONTAINER,
          // The operator's default: the toolbox bundled in the image.
          toolboxCommand: realNodeOperatorConfig(inject('realNodeSandboxImage')).toolboxCommand,
          mode,
          defaultTimeoutMs: 60_000,
          ...(options?.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
        });
        return { sandbox, cleanup: () => deletePod(podName) };
      },
      { ownContainer: true },
    );
  }
});
