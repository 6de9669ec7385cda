// vitest globalSetup for the real-node tier: the control plane of ../control-plane/global-setup.ts
// plus a real node (real-node.ts) with the sandbox image imported. It builds nothing: `make
// test-real-node` builds the kubelet, kube-router, the sandbox and pause images first. When
// the node cannot start, the tests see why (inject('realNodeUnavailable')) and skip with that
// reason instead of passing.
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import controlPlaneSetup from '../control-plane/global-setup.ts';
import { missingForClusterServices } from './cluster-services.ts';
import { builtImage } from './built-images.ts';
import { RealNodeUnavailable, startRealNode, type RealNode } from './real-node.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why the real node did not start ('' when it did): the command, version and error. */
    realNodeUnavailable: string;
    realNodeName: string;
    /** The sandbox image's reference, imported into the node's containerd. */
    realNodeSandboxImage: string;
    /** The node's bridge address (the host as pods see it). */
    realNodeBridgeIp: string;
    /** Why the node runs no kube-proxy and CoreDNS, or lacks the operator and Redis images ('' when it has all): the helm tests skip with it. */
    realNodeInClusterUnavailable: string;
    /** The operator and bundled-Redis images' references, imported into the node ('' when not built). */
    realNodeOperatorImage: string;
    realNodeRedisImage: string;
    /** The node's containerd socket, for `ctr --address` (killing a container from outside, as a crash would). */
    realNodeContainerdSocket: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stopPlane = await controlPlaneSetup(project);
  const binDir = project.getProvidedContext().controlPlaneBin;
  const stateDir = project.getProvidedContext().controlPlaneStateDir;
  const kubeconfig = project.getProvidedContext().kubeconfig;
  let node: RealNode | undefined;
  let unavailable = '';
  let sandboxRef = '';
  // The in-cluster operator (helm install) needs Services, DNS and two more images; without
  // them the node still runs and only those tests skip, saying why.
  const inCluster: { unavailable: string[]; operator?: { archive: string; ref: string }; redis?: { archive: string; ref: string } } = {
    unavailable: missingForClusterServices(binDir),
  };
  for (const [name, make] of [
    ['operator', 'make operator-image'],
    ['redis', 'make redis-image'],
  ] as const) {
    try {
      inCluster[name] = builtImage(name, make);
    } catch (error) {
      inCluster.unavailable.push(error instanceof RealNodeUnavailable ? error.reason : String(error));
    }
  }
  try {
    const sandbox = builtImage('sandbox', 'make sandbox-image');
    const pause = builtImage('pause', 'make real-node');
    sandboxRef = sandbox.ref;
    const extra = inCluster.unavailable.length === 0 ? [inCluster.operator!.archive, inCluster.redis!.archive] : [];
    node = await startRealNode({
      binDir,
      kubeconfig,
      caCert: join(stateDir, 'pki', 'ca.crt'),
      images: [sandbox.archive, ...extra],
      pauseImage: pause,
      clusterServices: inCluster.unavailable.length === 0,
      log: (message) => {
        if (process.env.CHAMVI_CONTROL_PLANE_VERBOSE) console.error(`real-node: ${message}`);
      },
    });
  } catch (error) {
    unavailable =
      error instanceof RealNodeUnavailable ? error.reason : `start failed: ${error instanceof Error ? error.message : String(error)}`;
    console.error(`real-node: UNAVAILABLE, the tier's tests skip: ${unavailable}`);
  }
  project.provide('realNodeUnavailable', unavailable);
  project.provide('realNodeName', node?.nodeName ?? '');
  project.provide('realNodeSandboxImage', sandboxRef);
  project.provide('realNodeBridgeIp', node?.bridgeIp ?? '');
  project.provide('realNodeInClusterUnavailable', unavailable || inCluster.unavailable.join('; '));
  project.provide('realNodeOperatorImage', inCluster.operator?.ref ?? '');
  project.provide('realNodeRedisImage', inCluster.redis?.ref ?? '');
  project.provide('realNodeContainerdSocket', node?.containerdSocket ?? '');

  return async () => {
    await node?.stop();
    await stopPlane();
  };
}
