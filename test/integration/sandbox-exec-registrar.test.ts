// The test harness's kwok exec registrar (test/support/sandbox-exec-registrar.ts) on the real
// API server: once stopped it stays stopped, and its stop ends what the pods still run, as a
// node ends a pod's processes. Both were holes the e2e and faults tiers fell into: a stopped
// registrar came back a second later and wired later tests' pods to its removed directory,
// and a toolbox left running wrote its journal after the test had removed everything.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { createSandboxPod, execWorkDir } from '../support/registrar-sandbox-pod.ts';
import { startSandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const NS = 'registrar-lifecycle';
let root: string;

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'chamvi-registrar-'));
  await createNamespace(NS);
});

afterAll(async () => {
  await deleteNamespace(NS);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('the sandbox exec registrar', () => {
  it('stays stopped: a pod made after its stop is wired by the registrar that runs, not by it', async () => {
    const first = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: path.join(root, 'first') });
    await first.stop();
    const stoppedAt = Date.now();
    const second = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: path.join(root, 'second') });
    try {
      await createSandboxPod(NS, 'after-stop');
      const workspace = await second.waitForWorkspace(NS, 'after-stop');
      // The stopped one restarted its watch a second after its stop; give it three.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, stoppedAt + 3_000 - Date.now())));
      expect(existsSync(path.join(root, 'first', NS))).toBe(false);
      expect(await execWorkDir(NS, 'after-stop')).toBe(workspace.workspaceDir);
    } finally {
      await second.stop();
    }
  });

  it('kills the processes kwok started for the pods when it stops, and waits until they are gone', async () => {
    const registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: path.join(root, 'kills') });
    await createSandboxPod(NS, 'running');
    const workspace = await registrar.waitForWorkspace(NS, 'running');
    // As kwok starts an exec: the Exec object's environment, which names the pod's home.
    const toolbox = spawn('sleep', ['60'], { env: { ...process.env, CHAMVI_HOME: workspace.homeDir }, stdio: 'ignore' });
    const other = spawn('sleep', ['60'], { env: { ...process.env, CHAMVI_HOME: path.join(root, 'elsewhere', 'home') }, stdio: 'ignore' });
    const exited = (child: typeof toolbox) => new Promise((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    const toolboxExit = exited(toolbox);
    try {
      // Exec'd, so its environment is the one given (before, /proc shows the test's own).
      await once(toolbox, 'spawn');
      await registrar.stop();
      // stop() waits until they are gone, so the exit is due at once: a registrar that kills
      // nothing fails here in a second, not after the sleep's minute.
      expect(await Promise.race([toolboxExit, delay(1_000, 'still running')])).toBe('SIGKILL');
      // A process of no pod of this registrar's is left alone.
      expect(other.exitCode).toBeNull();
      expect(other.signalCode).toBeNull();
    } finally {
      toolbox.kill('SIGKILL');
      other.kill('SIGKILL');
    }
  });
});
