// `make dev-cluster NODE=real` / `make dev-cluster-down`: the real node (real-node.ts) beside
// the dev cluster's kwok node, with the sandbox image imported. Its root's path is kept in
// .dev-cluster/real-node so `down` finds it after `up` has exited.
//
//   npx tsx test/support/real-node/cli.ts up     start it (the dev cluster must be up)
//   npx tsx test/support/real-node/cli.ts down   stop it and remove its root
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isControlPlaneRunning, readControlPlaneState } from '../control-plane/control-plane.ts';
import { missingForClusterServices } from './cluster-services.ts';
import { startRealNode, stopRealNode } from './real-node.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const stateDir = join(repoRoot, '.dev-cluster');
const rootFile = join(stateDir, 'real-node');
const imageDir = process.env.CHAMVI_IMAGE_DIR ?? join(process.env.CHAMVI_CACHE ?? join(homedir(), '.cache/chamvi-operator'), 'images');

function image(name: string): { archive: string; ref: string } {
  const text = readFileSync(join(imageDir, `chamvi-${name}.env`), 'utf8');
  const value = (key: string) => text.match(new RegExp(`^${key}=(.*)$`, 'm'))?.[1] ?? '';
  return { archive: value('ARCHIVE'), ref: value('REF') };
}

async function up(): Promise<void> {
  const plane = readControlPlaneState(stateDir);
  if (!plane || !isControlPlaneRunning(stateDir)) throw new Error('the dev cluster is not up: run `make dev-cluster` first');
  if (existsSync(rootFile)) {
    console.error(`real-node: already up (root ${readFileSync(rootFile, 'utf8').trim()})`);
    return;
  }
  // The operator and Redis images when built (make operator-image redis-image): `helm install` then works on the node.
  const inCluster = ['operator', 'redis']
    .filter((name) => existsSync(join(imageDir, `chamvi-${name}.env`)))
    .map((name) => image(name).archive);
  const node = await startRealNode({
    binDir: plane.binDir,
    kubeconfig: plane.kubeconfig,
    caCert: join(stateDir, 'pki', 'ca.crt'),
    images: [image('sandbox').archive, ...inCluster],
    pauseImage: image('pause'),
    persistent: true,
    // kube-proxy, the kubernetes Service's endpoint and CoreDNS, when built (make real-node).
    clusterServices: missingForClusterServices(plane.binDir).length === 0,
    log: (message) => console.error(`real-node: ${message}`),
  });
  writeFileSync(rootFile, `${node.root}\n`);
  console.error(
    `real-node: ${node.nodeName} Ready in ${node.startSeconds}s; sandbox image ${image('sandbox').ref}; logs in ${join(node.root, 'logs')}`,
  );
}

async function down(): Promise<void> {
  if (!existsSync(rootFile)) return;
  const root = readFileSync(rootFile, 'utf8').trim();
  const plane = readControlPlaneState(stateDir);
  await stopRealNode(root, { binDir: plane?.binDir ?? '', kubeconfig: plane?.kubeconfig ?? '' }, (m) => console.error(`real-node: ${m}`));
  rmSync(rootFile, { force: true });
  console.error('real-node: stopped');
}

const command = process.argv[2];
try {
  if (command === 'up') await up();
  else if (command === 'down') await down();
  else {
    console.error('usage: cli.ts up|down');
    process.exit(2);
  }
} catch (error) {
  console.error(`real-node ${command}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
