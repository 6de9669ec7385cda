// Security #11.8 on the local control plane: the operator, without allowUnisolatedSandboxes,
// probes the run's namespace before giving the run a sandbox. kwok enforces no NetworkPolicy
// and runs exec'd commands on this machine, so the probe pod's connection to the operator's
// HTTP port works even under its deny-all policy: the probe correctly finds isolation NOT
// enforced, the run waits (Pending, IsolationNotEnforced) and then fails with a message
// saying what a sandbox would reach, and the probe's pod and policy are gone afterwards.
// That a CNI which enforces NetworkPolicy makes the probe say "enforced" (and runs go on) is
// shown with the probe's ports in test/unit/isolation-probe.test.ts, and on a real node with
// an enforcing CNI in test/real-node/operator-runs.test.ts (the verdict there is "enforced").
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createNamespace, kubeconfigPath, kubectlOk, redisUrl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const NS = 'e2e-isolation';
const PROBE_SELECTOR = 'chamvi.dev/isolation-probe';
const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;

/** kubectl that throws with its stderr when it fails. */
const ok = (args: string[], input?: string) => kubectlOk(args, input === undefined ? {} : { input });

const statusOf = async (name: string) => JSON.parse((await ok(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.status}'])) || '{}');
const probeObjects = async () =>
  (await ok(['get', 'pods,networkpolicies', '-n', NS, '-l', PROBE_SELECTOR, '-o', 'name'])).split('\n').filter(Boolean);

async function applyRun(name: string): Promise<void> {
  const run = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: NS },
    spec: { task: 'Greet the world.', repository: { url: repoUrl }, model: { provider: 'scripted', scriptRef: { name: 'script' } } },
  };
  await ok(['apply', '-f', '-'], stringify(run));
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-isolation-'));
  repoUrl = createBareRepository(root);

  // Restricted, as run namespaces should be: the probe pod must be admitted there too.
  await createNamespace(NS, { restricted: true });
  const script = {
    turns: [
      { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }] },
      { text: 'done' },
    ],
  };
  await ok(
    ['apply', '-n', NS, '-f', '-'],
    stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'script' }, data: { 'script.json': JSON.stringify(script) } }),
  );
  registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(root, 'workspaces') });

  const configFile = join(root, 'operator.yaml');
  writeFileSync(configFile, stringify({ isolationProbe: { settleSeconds: 2, timeoutSeconds: 60 } }));
  operator = new OperatorProcess({
    kubeconfig: kubeconfigPath(),
    env: {
      CHAMVI_CONFIG: configFile,
      // The one test operator that does not opt in (test/support/operator-process.ts does).
      CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'false',
      REDIS_URL: redisUrl(),
      CHAMVI_REDIS_PREFIX: `isolation${Date.now()}`,
      CHAMVI_ALLOW_REPO: `file://${join(root, 'git')}/*`,
      CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
      CHAMVI_WATCH_NAMESPACES: NS,
      CHAMVI_LEADER_ELECTION: 'false',
      CHAMVI_IDENTITY: 'e2e-isolation',
    },
  });
  await operator.waitForLog('caches synced; reconciling', 60_000);
}, 180_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('security #11.8 isolation fails closed', () => {
  it('refuses a run where the probe finds NetworkPolicy not enforced, says why, and removes the probe pod and policy', async () => {
    await applyRun('unisolated');
    const seenProbeObjects = new Set<string>();
    const status = await eventually(
      async () => {
        for (const object of await probeObjects()) seenProbeObjects.add(object.split('/')[0]!);
        const current = await statusOf('unisolated');
        return current.phase === 'Failed' || current.phase === 'Succeeded' || current.phase === 'Running' ? current : undefined;
      },
      90_000,
      'the run to be refused',
    );

    expect(status).toMatchObject({ phase: 'Failed', reason: 'IsolationNotEnforced' });
    expect(status.message).toMatch(
      /^NetworkPolicy is not enforced in namespace e2e-isolation: a probe pod under a deny-all NetworkPolicy still reached 127\.0\.0\.1:\d+ after 2s\./,
    );
    expect(status.message).toMatch(/Redis .*cloud metadata service, the API server, internal services and the internet/);
    expect(status.message).toContain('allowUnisolatedSandboxes: true');
    // The probe really ran in the cluster: its pod and its policy existed ...
    expect([...seenProbeObjects].sort()).toEqual(['networkpolicy.networking.k8s.io', 'pod']);
    // ... and are gone.
    await eventually(
      async () => ((await probeObjects()).length === 0 ? true : undefined),
      30_000,
      'the probe pod and policy to be deleted',
    );

    // The run waited while the probe ran, and never got a sandbox.
    const events = JSON.parse(await ok(['get', 'events', '-n', NS, '--field-selector', 'involvedObject.name=unisolated', '-o', 'json']))
      .items as Array<{ type: string; reason: string; message: string }>;
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'Normal', reason: 'IsolationNotEnforced', message: expect.stringContaining('Waiting for a probe') }),
    );
    expect(events).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'IsolationNotEnforced' }));
    const sandboxPods = await ok(['get', 'pods', '-n', NS, '-l', 'chamvi.dev/run=unisolated', '-o', 'name']);
    expect(sandboxPods.trim()).toBe('');
    const actions = operator.logged('applied actions').flatMap((line) => (line.name === 'unisolated' ? (line.actions as string[]) : []));
    expect(actions).not.toContain('createPod');
    expect(operator.logged('isolation probed')).toEqual([expect.objectContaining({ namespace: NS, verdict: 'unenforced' })]);
  }, 150_000);

  it('refuses the next run in the namespace from the cached verdict, without probing again', async () => {
    await applyRun('unisolated-again');
    const status = await eventually(
      async () => {
        const current = await statusOf('unisolated-again');
        return current.phase === 'Failed' ? current : undefined;
      },
      30_000,
      'the second run to be refused',
    );
    expect(status.reason).toBe('IsolationNotEnforced');
    expect(operator.logged('isolation probed')).toHaveLength(1);
  }, 60_000);
});
