// A tenant with `admin` in one watched namespace deletes the operator's RoleBinding there (the
// chart makes a Role and RoleBinding per watched namespace): the operator's lists in it answer
// 403. It used to wait for that namespace's caches forever, so it reconciled nothing in any
// namespace and /readyz said "caches not synced yet" for good. Now it starts without it, says so
// once, stays ready naming it, and reconciles it once the RoleBinding is back. The operator runs
// as the chart's ServiceAccount, with the chart's own RBAC, on a real API server.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlCreate, kubectlJson, kubectlOk } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { chartDir, helm } from '../support/helm.ts';
import { eventually, type OperatorProcess } from '../support/operator-process.ts';

const KEPT = 'refused-kept';
const CUT = 'refused-cut';
/** The release namespace: the leader lease, and the operator's ServiceAccount. */
const RELEASE_NAMESPACE = `${KEPT}-lease`;
const RELEASE = 'rns';

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  subjects?: Array<{ kind: string; name: string; namespace: string }>;
  [key: string]: unknown;
}

/** A run that fails at once (its repository is not allowed): reconciled, it has a phase. */
const deniedRun = (namespace: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'denied', namespace },
  spec: {
    task: 'Say hello',
    repository: { url: 'https://github.com/other/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
  },
});

const phaseOf = async (namespace: string) =>
  (await kubectlJson<{ status?: { phase?: string } }>(['get', 'crun', 'denied', '-n', namespace])).status?.phase;

async function readyz(port: number): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: response.status, body: await response.text() };
}

let operator: OperatorProcess | undefined;
let root: string;
let cutBinding: Manifest;
let port: number;

beforeAll(async () => {
  for (const namespace of [KEPT, CUT, RELEASE_NAMESPACE]) await createNamespace(namespace);
  // The chart's RBAC for these watched namespaces, as `helm install` would make it.
  const rendered = await helm([
    'template',
    RELEASE,
    chartDir,
    '--namespace',
    RELEASE_NAMESPACE,
    '--set',
    `config.watchNamespaces={${KEPT},${CUT}}`,
    '--show-only',
    'templates/rbac.yaml',
  ]);
  if (rendered.code !== 0) throw new Error(rendered.stderr);
  const rbac = parseAllDocuments(rendered.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
  cutBinding = rbac.find((each) => each.kind === 'RoleBinding' && each.metadata.namespace === CUT)!;
  const serviceAccount = cutBinding.subjects![0]!.name;
  await kubectlOk(['create', 'serviceaccount', serviceAccount, '-n', RELEASE_NAMESPACE]);
  await kubectlCreate(...rbac);
  // The tenant of CUT, admin there, deletes the operator's RoleBinding; a run of theirs is waiting.
  await kubectlOk(['delete', 'rolebinding', cutBinding.metadata.name, '-n', CUT]);
  await kubectlCreate(deniedRun(KEPT), deniedRun(CUT));

  const token = (await kubectlOk(['create', 'token', serviceAccount, '-n', RELEASE_NAMESPACE, '--duration=1h'])).trim();
  const config = parse(readFileSync(kubeconfigPath(), 'utf8'));
  for (const each of config.users) each.user = { token };
  root = mkdtempSync(join(tmpdir(), 'chamvi-refused-'));
  const kubeconfig = join(root, 'operator.kubeconfig');
  writeFileSync(kubeconfig, stringify(config), { mode: 0o600 });
  // The lease the chart's ConfigMap names: its Role grants get and update on that one by name.
  const leaseRole = rbac.find(
    (each) => each.kind === 'Role' && (each.rules as Array<{ resources: string[] }>).some((rule) => rule.resources.includes('leases')),
  )!;
  const leaseName = (leaseRole.rules as Array<{ resourceNames?: string[] }>).find((rule) => rule.resourceNames)!.resourceNames![0]!;
  const operatorConfig = join(root, 'operator-config.yaml');
  writeFileSync(operatorConfig, stringify({ leaderElection: { leaseName } }));
  operator = startControllerOnlyOperator({
    namespaces: [KEPT, CUT],
    identity: 'op-refused',
    kubeconfig,
    env: { CHAMVI_CONFIG: operatorConfig },
  });
  port = (await operator.waitForLog('operator starting')).port as number;
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  for (const namespace of [KEPT, CUT, RELEASE_NAMESPACE]) await deleteNamespace(namespace);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('a watched namespace whose RoleBinding a tenant deleted', () => {
  it('holds back no other namespace, is named by /readyz and the log, and is reconciled once the RoleBinding is back', async () => {
    // Control: the operator really is denied there.
    const denied = await kubectl([
      'auth',
      'can-i',
      'list',
      'codingruns',
      '-n',
      CUT,
      '--as',
      `system:serviceaccount:${RELEASE_NAMESPACE}:${cutBinding.subjects![0]!.name}`,
    ]);
    expect(denied.stdout.trim()).toBe('no');

    const started = await operator!.waitForLog('caches synced; reconciling', 30_000);
    expect(started.unlisted).toEqual([CUT]);
    await eventually(async () => ((await phaseOf(KEPT)) === 'Failed' ? true : undefined), 30_000, `${KEPT}/denied reconciled`);
    expect(await phaseOf(CUT)).toBeUndefined();

    const ready = await readyz(port);
    expect(ready.status).toBe(200);
    expect(ready.body).toMatch(new RegExp(`^ok\\ninformers: degraded: .*${CUT} \\(HTTP 403\\)`));
    // Once for the run controller, however often its five informers tried again.
    const warnings = () =>
      operator!.lines.filter((line) => String(line.msg).startsWith('cannot list a watched namespace') && line.controller === 'runs');
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(warnings().map((line) => line.namespace)).toEqual([CUT]);

    // The RoleBinding is made again (helm upgrade would): the namespace lists within the informers' back-off (at most 30 s).
    await kubectlCreate(cutBinding);
    await eventually(async () => ((await phaseOf(CUT)) === 'Failed' ? true : undefined), 60_000, `${CUT}/denied reconciled`);
    expect(operator!.logged('a watched namespace set aside has listed; reconciling it').length).toBeGreaterThan(0);
    expect((await readyz(port)).body).toBe('ok\n');
  }, 150_000);
});
