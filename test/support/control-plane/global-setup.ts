// vitest globalSetup for the integration and e2e tiers: a fresh local control plane in a
// temporary state dir, torn down after the run. Tests reach it through inject()
// (see ../cluster.ts) or the KUBECONFIG / REDIS_URL / PATH set here.
//
// Set CHAMVI_KEEP_CONTROL_PLANE_STATE=1 to keep the state dir (logs) after the run.
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { ensureBinaries } from './binaries.ts';
import { applyManifestDir, removeStateDir, startControlPlane, stopControlPlane, type ControlPlane } from './control-plane.ts';
import { recordedProcesses } from './managed-process.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const statePrefix = 'chamvi-control-plane-';

// The integration and e2e projects both list this file; when they run in one vitest
// invocation they share one control plane instead of starting two on two cores.
interface Shared {
  plane: Promise<ControlPlane>;
  users: number;
}
const sharedKey = Symbol.for('chamvi.control-plane');
const globals = globalThis as typeof globalThis & { [sharedKey]?: Shared };

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// A vitest that was killed never ran its teardown: stop control planes whose owner is gone.
async function stopOrphans(): Promise<void> {
  for (const entry of readdirSync(tmpdir())) {
    if (!entry.startsWith(statePrefix)) continue;
    const dir = join(tmpdir(), entry);
    const ownerFile = join(dir, 'owner.pid');
    if (!existsSync(ownerFile) || alive(Number(readFileSync(ownerFile, 'utf8')))) continue;
    await stopControlPlane(dir);
    if (!process.env.CHAMVI_KEEP_CONTROL_PLANE_STATE) removeStateDir(dir);
  }
}

async function startShared(): Promise<ControlPlane> {
  await stopOrphans();
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(join(tmpdir(), statePrefix));
  writeFileSync(join(stateDir, 'owner.pid'), String(process.pid));
  // Last resort if vitest exits without teardown: SIGKILL every process group we started.
  process.once('exit', () => {
    for (const entry of recordedProcesses(stateDir)) {
      try {
        process.kill(-entry.pid, 'SIGKILL');
      } catch {
        // Already stopped.
      }
    }
  });
  const plane = await startControlPlane({
    stateDir,
    binDir,
    log: (message) => {
      if (process.env.CHAMVI_CONTROL_PLANE_VERBOSE) console.error(`control-plane: ${message}`);
    },
  });
  await applyManifestDir(plane, join(repoRoot, 'crds'));
  return plane;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const shared = (globals[sharedKey] ??= { plane: startShared(), users: 0 });
  shared.users += 1;
  const plane = await shared.plane;

  project.provide('kubeconfig', plane.kubeconfig);
  project.provide('redisUrl', plane.redisUrl);
  project.provide('controlPlaneBin', plane.binDir);
  project.provide('controlPlaneStateDir', plane.stateDir);
  process.env.KUBECONFIG = plane.kubeconfig;
  process.env.REDIS_URL = plane.redisUrl;
  if (!process.env.PATH?.startsWith(`${plane.binDir}:`)) process.env.PATH = `${plane.binDir}:${process.env.PATH ?? ''}`;

  return async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    delete globals[sharedKey];
    await plane.stop();
    if (!process.env.CHAMVI_KEEP_CONTROL_PLANE_STATE) removeStateDir(plane.stateDir);
  };
}
