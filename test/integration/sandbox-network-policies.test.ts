// #17.5: one deny-all NetworkPolicy a namespace fences in every run's sandbox, instead of a
// policy made and deleted for every run. On a real API server: runs started together share it,
// a policy someone opened up is put back before a pod starts, one someone deleted under a
// running sandbox is made again, and a name squatted by a policy the operator did not make
// stops the namespace's runs instead of being trusted or overwritten.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import {
  SANDBOX_DENY_ALL_POLICY,
  isSandboxPolicyAsWanted,
  sandboxDenyAllPolicy,
} from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { createNamespace, kubectl, kubectlCreate, kubectlJson } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';
import { selectorString } from '../support/label-selector.ts';

const SHARED = 'np-shared';
const SQUATTED = 'np-squatted';
const OPENED = 'np-opened';

interface Run {
  metadata: { name: string; uid: string };
  status?: { phase?: string; reason?: string; message?: string };
}

const json = kubectlJson;

const create = kubectlCreate;

const codingRun = (namespace: string, name: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace },
  spec: {
    task: 'Make the README greet the world',
    repository: { url: 'https://github.com/acme/hello.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
  },
});

const script = (namespace: string) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'script', namespace },
  data: { 'script.json': '{"turns":[{"text":"done"}]}' },
});

const policyIn = (namespace: string) =>
  json<V1NetworkPolicy>(['get', 'networkpolicy', SANDBOX_DENY_ALL_POLICY, '-n', namespace]).catch(() => undefined);

function phaseOf(namespace: string, name: string, phase: string, timeoutMs = 30_000): Promise<Run> {
  return eventually(
    async () => {
      const run = await json<Run>(['get', 'crun', name, '-n', namespace]);
      return run.status?.phase === phase ? run : undefined;
    },
    timeoutMs,
    `${namespace}/${name} to reach ${phase}`,
  );
}

/** What someone with NetworkPolicy rights in a namespace would put in place of the deny-all: all egress open. */
const opened = (namespace: string, labels: Record<string, string>) => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: SANDBOX_DENY_ALL_POLICY, namespace, labels },
  spec: { podSelector: {}, policyTypes: ['Egress'], egress: [{}] },
});

let operator: OperatorProcess | undefined;

beforeAll(async () => {
  for (const namespace of [SHARED, SQUATTED, OPENED]) {
    await createNamespace(namespace, { restricted: true });
    await create(script(namespace));
  }
  await createNamespace(`${SHARED}-lease`);
  // Made before the operator starts, so its first look finds them.
  await create(opened(SQUATTED, { app: 'mine' }));
  await create(opened(OPENED, sandboxDenyAllPolicy(OPENED).metadata!.labels!));
  operator = startControllerOnlyOperator({ namespaces: [SHARED, SQUATTED, OPENED], identity: 'op-sandbox-policies' });
  await operator.waitForLog('caches synced; reconciling');
}, 60_000);

afterAll(async () => {
  await operator?.kill();
});

describe("#17.5 the namespace's sandbox deny-all", () => {
  it('is made once for runs started together, selects every one of their pods, and stays when they are deleted', async () => {
    const names = ['one', 'two', 'three', 'four', 'five'];
    await create(...names.map((name) => codingRun(SHARED, name)));
    const runs = await Promise.all(names.map((name) => phaseOf(SHARED, name, 'Running')));
    const policy = (await policyIn(SHARED))!;
    expect(isSandboxPolicyAsWanted(policy, sandboxDenyAllPolicy(SHARED))).toBe(true);
    expect(policy.metadata!.ownerReferences).toBeUndefined();
    // Not replaced along the way: still its first version (the API server counts spec changes).
    expect(policy.metadata!.generation).toBe(1);
    // One create for the five: the reconciles side by side waited for the first one's, and
    // none sent its own to meet a 409.
    const inShared = (message: string) => operator!.logged(message).filter((line) => line.namespace === SHARED);
    expect(inShared('made a sandbox NetworkPolicy')).toHaveLength(1);
    expect(inShared('a sandbox NetworkPolicy was there already')).toEqual([]);
    const selected = await json<{ items: Array<{ metadata: { name: string } }> }>([
      'get',
      'pods',
      '-n',
      SHARED,
      '-l',
      selectorString(policy.spec!.podSelector),
    ]);
    expect(selected.items.map((pod) => pod.metadata.name).sort()).toEqual(runs.map((run) => sandboxPodName(run)).sort());
    // Only the deny-all: no run here has egress, and no run has a policy of its own.
    const all = await json<{ items: V1NetworkPolicy[] }>(['get', 'networkpolicies', '-n', SHARED]);
    expect(all.items.map((item) => item.metadata!.name)).toEqual([SANDBOX_DENY_ALL_POLICY]);

    await kubectl(['delete', 'crun', ...names.slice(1), '-n', SHARED, '--wait=true', '--timeout=30s']);
    expect((await policyIn(SHARED))!.metadata!.uid).toBe(policy.metadata!.uid);
  });

  it('is made again at once when someone deletes it under a running sandbox', async () => {
    const before = (await policyIn(SHARED))!;
    await kubectl(['delete', 'networkpolicy', SANDBOX_DENY_ALL_POLICY, '-n', SHARED]);
    const again = await eventually(
      async () => {
        const policy = await policyIn(SHARED);
        return policy && policy.metadata!.uid !== before.metadata!.uid ? policy : undefined;
      },
      10_000,
      'the deny-all to be made again',
    );
    expect(isSandboxPolicyAsWanted(again, sandboxDenyAllPolicy(SHARED))).toBe(true);
    expect((await json<Run>(['get', 'crun', 'one', '-n', SHARED])).status?.phase).toBe('Running');
  });

  it('is put back as it was when someone edits it under a running sandbox', async () => {
    const result = await kubectl(['apply', '-f', '-'], {
      input: stringify(opened(SHARED, sandboxDenyAllPolicy(SHARED).metadata!.labels!)),
    });
    expect(result.code, result.stderr).toBe(0);
    await eventually(
      async () => (isSandboxPolicyAsWanted(await policyIn(SHARED), sandboxDenyAllPolicy(SHARED)) ? true : undefined),
      10_000,
      'the deny-all to be put back',
    );
  });

  it("replaces one opened up under its name with the operator's labels before the run's pod exists", async () => {
    const openedBefore = (await policyIn(OPENED))!;
    await create(codingRun(OPENED, 'after-edit'));
    const run = await phaseOf(OPENED, 'after-edit', 'Running');
    const policy = (await policyIn(OPENED))!;
    expect(isSandboxPolicyAsWanted(policy, sandboxDenyAllPolicy(OPENED))).toBe(true);
    // Replaced (the same object, its spec's second version), not deleted and made again.
    expect(policy.metadata!.uid).toBe(openedBefore.metadata!.uid);
    expect(policy.metadata!.generation).toBe(2);
    // In the decision that made the pod, before it.
    const actions = operator!
      .logged('applied actions')
      .filter((line) => line.uid === run.metadata.uid)
      .flatMap((line) => line.actions as string[]);
    expect(actions.indexOf('ensureSandboxPolicy')).toBeGreaterThanOrEqual(0);
    expect(actions.indexOf('createPod')).toBeGreaterThan(actions.indexOf('ensureSandboxPolicy'));
  });

  it('fails the runs of a namespace where a policy the operator did not make holds its name, and leaves that policy alone', async () => {
    const squatter = (await policyIn(SQUATTED))!;
    await create(codingRun(SQUATTED, 'squatted'));
    const run = await phaseOf(SQUATTED, 'squatted', 'Failed');
    expect(run.status).toMatchObject({ reason: 'SandboxNameTaken' });
    expect(run.status!.message).toContain(`NetworkPolicy ${SQUATTED}/${SANDBOX_DENY_ALL_POLICY} (it lacks the operator's labels`);
    expect((await kubectl(['get', 'pod', sandboxPodName(run), '-n', SQUATTED])).code).not.toBe(0);
    const after = (await policyIn(SQUATTED))!;
    expect(after.metadata!.uid).toBe(squatter.metadata!.uid);
    expect(after.metadata!.resourceVersion).toBe(squatter.metadata!.resourceVersion);
  });
});
