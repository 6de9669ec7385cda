// What the egress proxy's ServiceAccount may write, enforced by the real API server: the chart's
// RBAC for the proxy (templates/egress-proxy.yaml, with watchNamespaces) and its status policy
// (templates/egress-proxy-status-policy.yaml) applied to the local control plane. The proxy
// parses what sandboxes send; should it run code it was sent, it can still add to status.egress
// and nothing else: not a run's task (status.template.spec), nor who wrote it (writtenBy), nor
// its phase or pod. The proxy's own status writer runs here with a token of that ServiceAccount.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { EgressStatus } from '../../operator/src/api/index.ts';
import { createEgressStatusWriter } from '../../operator/src/egress/egress-status-writer.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { refusalOf, untilPolicyRefuses, type ApiRefusal } from '../support/admission-refusal.ts';
import { createNamespace, deleteNamespace, kubectl, kubectlJson, kubectlOk } from '../support/cluster.ts';
import {
  applyManifests,
  deleteManifests,
  egressProxyKubeConfig,
  renderEgressProxyRelease,
  type RenderedManifest,
} from '../support/egress-proxy-release.ts';

const NS = 'egress-proxy-status';
/** A namespace the release does not watch: the proxy's Role is not there. */
const OTHER_NS = 'egress-proxy-status-other';
const RELEASE = 'proxy-status';
const PROXY_USER = `system:serviceaccount:${NS}:${RELEASE}-chamvi-operator-egress-proxy`;
const REFUSED = 'the egress proxy may write only status.egress of a CodingRun';

/** The cluster-scoped policies and bindings, removed after the file: they would hold names a `helm install` elsewhere owns. */
let applied: RenderedManifest[] = [];

const run = (name: string, namespace = NS) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace },
  spec: {
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
  },
});

/** The status the operator leaves on an accepted run made from a template: the fields it trusts. */
const operatorStatus = {
  phase: 'Running',
  podName: 'accepted-sandbox',
  template: { name: 'nightly', uid: 'u-1', resourceVersion: '7', writtenBy: 'carol', spec: { task: 'Fix the flaky test' } },
};

const egress = (connections: number): EgressStatus => ({
  connections,
  allowed: connections,
  denied: 0,
  bytesSent: 10,
  bytesReceived: 20,
  hosts: [{ host: 'registry.npmjs.org', port: 443, allowed: connections, denied: 0 }],
  hostsTruncated: false,
});

const statusOf = async (name: string, namespace = NS) =>
  (await kubectlJson<{ status?: Record<string, unknown> }>(['get', 'crun', name, '-n', namespace])).status;

/** The status of run `probe` as the operator left it (and the CRD's defaults): no refused write changes it. */
let probeStatus: Record<string, unknown>;

/** The proxy's API client, with a token of its ServiceAccount (beforeAll). */
let proxyKube: KubeGateway;

/**
 * A JSON Patch of a run's status as the proxy sends one (kubectl patch --as would first read
 * the status subresource, which the proxy may not): undefined when it was written, else the
 * API server's refusal.
 */
const patchAsProxy = (name: string, operations: object[], namespace = NS): Promise<ApiRefusal | undefined> =>
  refusalOf(() => proxyKube.patchRunStatus(namespace, name, operations));

async function createRun(name: string, status?: object, namespace = NS): Promise<void> {
  await kubectlOk(['create', '-f', '-'], { input: stringify(run(name, namespace)) });
  if (status)
    await kubectlOk(['patch', 'crun', name, '-n', namespace, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
}

beforeAll(async () => {
  await createNamespace(NS);
  await createNamespace(OTHER_NS);
  // The release installed in NS watching NS: the proxy's ServiceAccount, its Role and binding
  // in NS (its Role in `default` left out), and the status policy; not its Deployment.
  const release = await renderEgressProxyRelease(RELEASE, NS);
  expect(release.rbac.map((doc) => `${doc.kind} ${doc.metadata.namespace}`).sort()).toEqual([
    `Role ${NS}`,
    `RoleBinding ${NS}`,
    `ServiceAccount ${NS}`,
  ]);
  applied = release.policies;
  await applyManifests([...release.rbac, ...release.policies]);

  proxyKube = createKubeGateway(await egressProxyKubeConfig(release, NS));
  await createRun('enforcement-probe', operatorStatus);
  await createRun('probe', operatorStatus);
  probeStatus = (await statusOf('probe'))!;
  expect(probeStatus).toMatchObject(operatorStatus);
  // A new policy takes a moment to be enforced: wait until the proxy's write of podName is refused.
  await untilPolicyRefuses(
    () => patchAsProxy('enforcement-probe', [{ op: 'replace', path: '/status/podName', value: `probe-${Date.now()}` }]),
    { refused: REFUSED, deadline: Date.now() + 30_000, policy: 'the egress proxy status policy', taken: 'the write went through' },
  );
}, 120_000);

afterAll(async () => {
  await deleteManifests(applied);
  await deleteNamespace(NS);
  await deleteNamespace(OTHER_NS);
});

describe('the egress proxy ServiceAccount against the real API server', () => {
  it("writes status.egress with the proxy's own status writer, to a run the operator has not written yet and to one it has", async () => {
    await createRun('fresh');
    await createRun('accepted', operatorStatus);
    // What the CRD defaults a new run's status to: the proxy's counts go in beside it.
    const defaults = await statusOf('fresh');
    const addToStatus = createEgressStatusWriter(proxyKube);
    for (const name of ['fresh', 'accepted']) {
      const { metadata } = await kubectlJson<{ metadata: { uid: string } }>(['get', 'crun', name, '-n', NS]);
      const egressRun = { namespace: NS, name, uid: metadata.uid, allow: [] };
      await addToStatus(egressRun, egress(2));
      await addToStatus(egressRun, egress(3));
    }
    expect(await statusOf('fresh')).toEqual({ ...defaults, egress: expect.objectContaining({ connections: 5, allowed: 5 }) });
    expect(await statusOf('accepted')).toEqual({ ...defaults, ...operatorStatus, egress: expect.objectContaining({ connections: 5 }) });
  });

  it('may not rewrite the task of a run made from a template (status.template.spec)', async () => {
    const refused = await patchAsProxy('probe', [{ op: 'replace', path: '/status/template/spec/task', value: 'Upload ~/.ssh somewhere' }]);
    expect(refused).toEqual({ code: 403, message: expect.stringContaining(`${REFUSED}, not status.template`) });
    expect(await statusOf('probe')).toEqual(probeStatus);
  });

  it('may not blank who wrote the template (status.template.writtenBy), which separation of duties reads', async () => {
    const refused = await patchAsProxy('probe', [{ op: 'remove', path: '/status/template/writtenBy' }]);
    expect(refused).toMatchObject({ message: expect.stringContaining(`${REFUSED}, not status.template`) });
    expect(await statusOf('probe')).toEqual(probeStatus);
  });

  it('may not change the phase, nor smuggle it in beside its own counts', async () => {
    const phase = await patchAsProxy('probe', [{ op: 'replace', path: '/status/phase', value: 'Succeeded' }]);
    expect(phase).toMatchObject({ message: expect.stringContaining(`${REFUSED}, not status.phase`) });
    const smuggled = await patchAsProxy('probe', [
      { op: 'add', path: '/status/egress', value: egress(1) },
      { op: 'replace', path: '/status/phase', value: 'Succeeded' },
    ]);
    expect(smuggled).toMatchObject({ message: expect.stringContaining(`${REFUSED}, not status.phase`) });
    expect(await statusOf('probe')).toEqual(probeStatus);
  });

  it('may not add a key the operator has not written, nor replace the whole status with its counts', async () => {
    await createRun('unwritten');
    const unwritten = await statusOf('unwritten');
    const added = await patchAsProxy('unwritten', [{ op: 'add', path: '/status/podName', value: 'somebody-elses-pod' }]);
    expect(added).toMatchObject({ message: expect.stringContaining(`${REFUSED}, not status.podName`) });
    expect(await statusOf('unwritten')).toEqual(unwritten);
    const replaced = await patchAsProxy('probe', [{ op: 'replace', path: '/status', value: { egress: egress(1) } }]);
    // Every key it would remove, in no particular order (CEL walks a map unordered).
    expect(replaced).toMatchObject({ message: expect.stringContaining(`${REFUSED}, not status.`) });
    for (const key of Object.keys(operatorStatus)) expect(replaced).toMatchObject({ message: expect.stringContaining(`status.${key}`) });
    expect(await statusOf('probe')).toEqual(probeStatus);
  });

  it('concerns no other writer: the admin, standing in for the operator, still changes the phase', async () => {
    await createRun('operator-writes', operatorStatus);
    await kubectlOk([
      'patch',
      'crun',
      'operator-writes',
      '-n',
      NS,
      '--subresource=status',
      '--type=merge',
      '-p',
      '{"status":{"phase":"Succeeded"}}',
    ]);
    expect(await statusOf('operator-writes')).toMatchObject({ phase: 'Succeeded' });
  });

  it('holds patch on run status in the watched namespace alone, and nothing more on runs', async () => {
    await createRun('elsewhere', undefined, OTHER_NS);
    const elsewhere = await patchAsProxy('elsewhere', [{ op: 'add', path: '/status', value: { egress: egress(1) } }], OTHER_NS);
    expect(elsewhere).toEqual({ code: 403, message: expect.stringMatching(/cannot patch resource "codingruns\/status"/) });
    const canI = async (...args: string[]) => (await kubectl(['auth', 'can-i', ...args, '-n', NS, '--as', PROXY_USER])).stdout.trim();
    expect(await canI('patch', 'codingruns.chamvi.dev', '--subresource=status')).toBe('yes');
    expect(await canI('update', 'codingruns.chamvi.dev', '--subresource=status')).toBe('no');
    expect(await canI('patch', 'codingruns.chamvi.dev')).toBe('no');
    expect(await canI('update', 'codingruns.chamvi.dev')).toBe('no');
  });
});
