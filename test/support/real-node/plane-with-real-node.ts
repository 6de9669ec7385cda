// A throwaway control plane with the real node beside it and the built sandbox image loaded,
// for the benchmarks that need both (real-node-bench.ts, warm-pool-bench.ts --real-node).
// Throws RealNodeUnavailable (a missing image, package or binary, not root, another real node
// running) after stopping what it started, so a bench can write the reason and exit 0.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureBinaries } from '../control-plane/binaries.ts';
import { removeStateDir, startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { builtImage } from './built-images.ts';
import { startRealNode, type RealNode } from './real-node.ts';

export interface PlaneWithRealNode {
  binDir: string;
  plane: ControlPlane;
  node: RealNode;
  /** The sandbox image's archive (imported into the node's containerd) and reference. */
  sandboxImage: { archive: string; ref: string };
  stop(): Promise<void>;
}

export async function startPlaneWithRealNode(): Promise<PlaneWithRealNode> {
  // The images first: their absence is the cheapest reason to skip.
  const sandboxImage = builtImage('sandbox', 'make sandbox-image');
  const pause = builtImage('pause', 'make real-node');
  const binDir = ensureBinaries();
  const plane = await startControlPlane({ stateDir: mkdtempSync(path.join(tmpdir(), 'chamvi-control-plane-')), binDir });
  const stopPlane = async () => {
    await plane.stop();
    removeStateDir(plane.stateDir);
  };
  let node: RealNode;
  try {
    node = await startRealNode({
      binDir,
      kubeconfig: plane.kubeconfig,
      caCert: path.join(plane.stateDir, 'pki', 'ca.crt'),
      images: [sandboxImage.archive],
      pauseImage: pause,
    });
  } catch (error) {
    await stopPlane();
    throw error;
  }
  return {
    binDir,
    plane,
    node,
    sandboxImage,
    async stop() {
      await node.stop();
      await stopPlane();
    },
  };
}
