// Where warm-pool-bench.ts runs its sandboxes: kwok pods whose exec runs the checkout's toolbox
// on this machine (a pod "starts" in ~40 ms, so a pool saves little), or the real node
// (kubelet + containerd + runc, the built sandbox image: a pod takes ~1.5 s to be Ready), as a
// real-node deployment places them. The bench itself does not change between the two.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import { removeStateDir, startControlPlane } from '../support/control-plane/control-plane.ts';
import { startPlaneWithRealNode } from '../support/real-node/plane-with-real-node.ts';
import { realNodeOperatorConfig, realNodePlacement } from '../support/real-node/sandbox-pods.ts';
import { startSandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

export interface WarmPoolTarget {
  binDir: string;
  kubeconfig: string;
  redisUrl: string;
  /** Labels of the runs' namespace (the pool's too). */
  namespaceLabels: Record<string, string>;
  /** Operator config beside warmPools: the same for the fresh pods and the pool's. */
  config: Record<string, unknown>;
  /** Operator environment beside the bench's. */
  env: Record<string, string>;
  /** Where the sandboxes run, for the results' `measured`. */
  sandboxes: string;
  /** Ends what the target started (not the operator: the bench kills it first). */
  stop(): Promise<void>;
}

export async function kwokTarget(work: string): Promise<WarmPoolTarget> {
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-warm-bench-plane-'));
  const plane = await startControlPlane({ stateDir, binDir });
  const registrar = await startSandboxExecRegistrar({ kubeconfig: plane.kubeconfig, rootDir: path.join(work, 'workspaces') });
  return {
    binDir,
    kubeconfig: plane.kubeconfig,
    redisUrl: plane.redisUrl,
    namespaceLabels: {},
    config: {},
    env: { CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${DEFAULT_TOOLBOX_PATH}` },
    sandboxes: 'kwok pods running the real toolbox',
    async stop() {
      await registrar.stop();
      await plane.stop();
      removeStateDir(stateDir);
    },
  };
}

/** Throws RealNodeUnavailable when the node cannot start here. */
export async function realNodeTarget(): Promise<WarmPoolTarget> {
  const { binDir, plane, sandboxImage, stop } = await startPlaneWithRealNode();
  return {
    binDir,
    kubeconfig: plane.kubeconfig,
    redisUrl: plane.redisUrl,
    // As the real-node tests: the sandbox pod (fresh or pooled) must pass PodSecurity restricted.
    namespaceLabels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' },
    // The placement reaches the pool's pods too (warmPoolPod builds the run's pod from this
    // config); no sandbox resources here, or runs with their own would never match a pool pod.
    config: { sandboxImage: sandboxImage.ref, sandboxPlacement: realNodePlacement },
    // The toolbox inside the image (the operator's default for it), not the checkout's.
    env: { CHAMVI_TOOLBOX_COMMAND: realNodeOperatorConfig(sandboxImage.ref).toolboxCommand.join(' ') },
    sandboxes: 'the real node (kubelet, containerd, runc) running the built sandbox image',
    stop,
  };
}
