// The test harness's kwok exec registrar (test/support/sandbox-exec-registrar.ts) on the real
// API server, when the write of a pod's Exec object fails: the pod is wired once the API server
// takes the write. A registrar that gave up after one failed write left its pod with no Exec for
// its whole life, so every exec the operator made into it failed, and a run spent its job's ten
// tries (about 90 s) short of its phase: the shape of run-deletion's one CI failure (delete-3
// never reached WaitingForApproval). Nothing said why: the registrar's log went nowhere.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlOk } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { createSandboxPod, execWorkDir } from '../support/registrar-sandbox-pod.ts';
import { startSandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const NS = 'registrar-retries';
const POLICY = 'registrar-retries-refuse-execs';
const REFUSED = 'Exec writes refused for the test';
let root: string;

function execObject(name: string, workDir: string): string {
  return JSON.stringify({
    apiVersion: 'kwok.x-k8s.io/v1alpha1',
    kind: 'Exec',
    metadata: { name, namespace: NS },
    spec: { execs: [{ local: { workDir } }] },
  });
}

/** A policy that has the API server refuse every write of an Exec object in NS, and the function that lifts it. */
async function refuseExecWrites(): Promise<() => Promise<void>> {
  const manifests = [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: POLICY },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [{ apiGroups: ['kwok.x-k8s.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['execs'] }],
        },
        validations: [{ expression: 'false', message: REFUSED }],
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: POLICY },
      spec: {
        policyName: POLICY,
        validationActions: ['Deny'],
        matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NS } } },
      },
    },
  ];
  await kubectlOk(['apply', '-f', '-'], { input: manifests.map((manifest) => stringify(manifest)).join('---\n') });
  // The API server enforces a new policy a moment later: wait until it refuses a probe.
  // Refused by the policy itself, not for any other reason (a probe left behind, a schema error).
  await eventually(
    async () => {
      const probe = await kubectl(['create', '-f', '-'], { input: execObject('probe', '/tmp') });
      if (probe.code === 0) await kubectl(['delete', 'execs.kwok.x-k8s.io', 'probe', '-n', NS, '--ignore-not-found']);
      return probe.stderr.includes(REFUSED) ? true : undefined;
    },
    30_000,
    'the policy to refuse an Exec',
  );
  await kubectl(['delete', 'execs.kwok.x-k8s.io', 'probe', '-n', NS, '--ignore-not-found']);
  return async () => {
    await kubectl(['delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', POLICY, '--ignore-not-found']);
    // And stops enforcing it a moment later too: wait until a probe is taken, so that nothing
    // after this (the next test) meets a policy already deleted.
    await eventually(
      async () => ((await kubectl(['create', '-f', '-'], { input: execObject('lifted', '/tmp') })).code === 0 ? true : undefined),
      60_000,
      'the policy to be lifted',
    );
    await kubectl(['delete', 'execs.kwok.x-k8s.io', 'lifted', '-n', NS, '--ignore-not-found']);
  };
}

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'chamvi-registrar-retries-'));
  await createNamespace(NS);
});

afterAll(async () => {
  await kubectl(['delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', POLICY, '--ignore-not-found']);
  await deleteNamespace(NS);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('the sandbox exec registrar, when the write of an Exec fails', () => {
  it('wires a pod whose Exec the API server refused at first, once it takes the write', async () => {
    const lift = await refuseExecWrites();
    const said: string[] = [];
    const registrar = await startSandboxExecRegistrar({
      kubeconfig: kubeconfigPath(),
      rootDir: path.join(root, 'refused'),
      log: (message) => said.push(message),
    });
    try {
      await createSandboxPod(NS, 'refused-at-first');
      // Control: the write was tried and refused.
      // Generous: the whole tier shares this machine, and the registrar lists pods of every namespace.
      await eventually(
        async () => (said.some((message) => message.startsWith(`could not register exec for ${NS}/refused-at-first`)) ? true : undefined),
        90_000,
        'the refused registration',
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}; the registrar said: ${said.slice(-5).join(' | ') || 'nothing'}`);
      });
      expect(registrar.workspaceOf(NS, 'refused-at-first')).toBeUndefined();
      await lift();
      const workspace = await registrar.waitForWorkspace(NS, 'refused-at-first', 20_000);
      expect(await execWorkDir(NS, 'refused-at-first')).toBe(workspace.workspaceDir);
    } finally {
      await lift().catch(() => undefined);
      await registrar.stop();
    }
  }, 240_000);

  it("takes over an Exec already under the pod's name (a create that landed but whose answer was lost)", async () => {
    await kubectlOk(['create', '-f', '-'], { input: execObject('left-behind', path.join(root, 'elsewhere')) });
    const registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: path.join(root, 'taken-over') });
    try {
      await createSandboxPod(NS, 'left-behind');
      const workspace = await registrar.waitForWorkspace(NS, 'left-behind', 20_000);
      expect(await execWorkDir(NS, 'left-behind')).toBe(workspace.workspaceDir);
    } finally {
      await registrar.stop();
    }
  });
});
