// `make dev-cluster` / `make dev-cluster-down`: a long-lived local control plane with its
// state in .dev-cluster/ at the repo root. The processes are detached, so they keep
// running after this CLI exits; their pid files let `down` stop them later.
//
//   npx tsx test/support/control-plane/cli.ts up     build what is missing, start, print env
//   npx tsx test/support/control-plane/cli.ts env    print .dev-cluster/env if it is up
//   npx tsx test/support/control-plane/cli.ts down   stop everything, remove .dev-cluster/
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBinaries } from './binaries.ts';
import {
  applyManifestDir,
  isControlPlaneRunning,
  removeStateDir,
  startControlPlane,
  stopControlPlane,
  type ControlPlaneState,
} from './control-plane.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const stateDir = join(repoRoot, '.dev-cluster');
const envFile = join(stateDir, 'env');

const shellQuote = (value: string) => `'${value.replaceAll("'", `'\\''`)}'`;

function envFileText(state: ControlPlaneState): string {
  return [
    `export KUBECONFIG=${shellQuote(state.kubeconfig)}`,
    `export REDIS_URL=${shellQuote(state.redisUrl)}`,
    // kubectl and helm from the cache, matching the API server's version.
    `export PATH=${shellQuote(state.binDir)}:"$PATH"`,
    '',
  ].join('\n');
}

async function up(): Promise<void> {
  if (isControlPlaneRunning(stateDir) && existsSync(envFile)) {
    process.stdout.write(readFileSync(envFile, 'utf8'));
    return;
  }
  if (existsSync(stateDir)) {
    // Left over from a crash or a reboot: whatever still runs of it goes first.
    console.error('dev-cluster: found a stale .dev-cluster/, cleaning it up');
    await stopControlPlane(stateDir);
    removeStateDir(stateDir);
  }
  const binDir = ensureBinaries();
  const plane = await startControlPlane({ stateDir, binDir, log: (message) => console.error(`dev-cluster: ${message}`) });
  if (await applyManifestDir(plane, join(repoRoot, 'crds'))) console.error('dev-cluster: applied crds/');
  writeFileSync(envFile, envFileText(plane));
  console.error(`dev-cluster: up in ${plane.startSeconds}s; logs in ${join(stateDir, 'logs')}; load it with: . .dev-cluster/env`);
  process.stdout.write(readFileSync(envFile, 'utf8'));
}

async function down(): Promise<void> {
  await stopControlPlane(stateDir);
  removeStateDir(stateDir);
  console.error('dev-cluster: stopped, .dev-cluster/ removed');
}

function env(): void {
  if (!isControlPlaneRunning(stateDir) || !existsSync(envFile)) {
    console.error('dev-cluster: not running; start it with `make dev-cluster`');
    process.exit(1);
  }
  process.stdout.write(readFileSync(envFile, 'utf8'));
}

const command = process.argv[2];
try {
  if (command === 'up') await up();
  else if (command === 'down') await down();
  else if (command === 'env') env();
  else {
    console.error('usage: cli.ts up|down|env');
    process.exit(2);
  }
} catch (error) {
  console.error(`dev-cluster ${command}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
