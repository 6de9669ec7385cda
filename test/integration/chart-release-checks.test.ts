// Values that rendered a release which did not do what they said now fail `helm template`
// with a message naming what to change, or render what makes them work
// (templates/_config-checks.tpl chamvi.checkRelease): separation of duties without the approval
// policy that enforces it, leader election off under a rolling update of two pods, an operator
// /tmp a run author could overfill to evict the pod, a namespace budget two namespaces fill the
// bundled Redis with, and an egress proxy Service of your own that the operator may not read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml, stringify } from 'yaml';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { createNamespace, deleteNamespace, kubectl } from '../support/cluster.ts';
import { chartDir, helm } from '../support/helm.ts';

const RELEASE = 'checks';
const NAMESPACE = 'chamvi-chart-checks';
const PROXY_NAMESPACE = 'chamvi-chart-checks-proxy';
const OPERATOR = `system:serviceaccount:${NAMESPACE}:${RELEASE}-chamvi-operator`;
const MiB = 1024 * 1024;

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  [key: string]: any;
}

const template = (...args: string[]) => helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...args]);

async function render(...args: string[]): Promise<Manifest[]> {
  const result = await template(...args);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
}

/** helm's error for these values; fails the test when they render. */
async function refusal(...args: string[]): Promise<string> {
  const result = await template(...args);
  expect(result.code, 'helm template succeeded').not.toBe(0);
  return result.stderr;
}

const deployment = (docs: Manifest[]) =>
  docs.find((doc) => doc.kind === 'Deployment' && doc.metadata.name === `${RELEASE}-chamvi-operator`)!;
const operatorConfig = (docs: Manifest[]) =>
  loadOperatorConfig(
    parseYaml(docs.find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name.endsWith('-config'))!.data['config.yaml']),
    {},
  );
const tmpSizeLimit = (docs: Manifest[]) =>
  (deployment(docs).spec.template.spec.volumes as Array<{ name: string; emptyDir?: { sizeLimit: string } }>).find(
    (volume) => volume.name === 'tmp',
  )!.emptyDir!.sizeLimit;

describe('the chart refuses values that render a release that does not do what they say', () => {
  it('refuses separation of duties without the approval policy that enforces it, and renders both policies with it', async () => {
    expect(await refusal('--set', 'approvalPolicy.enabled=false', '--set', 'approvalPolicy.separationOfDuties=true')).toMatch(
      /approvalPolicy\.separationOfDuties is true but approvalPolicy\.enabled is false.*set approvalPolicy\.enabled=true/,
    );
    const separated = await render('--set', 'approvalPolicy.separationOfDuties=true');
    const policies = separated
      .filter((doc) => doc.kind === 'ValidatingAdmissionPolicy')
      .map((doc) => doc.metadata.name.replace(`${RELEASE}-chamvi-operator-`, ''));
    expect(policies.sort()).toEqual(['allow-repo', 'approvals', 'run-owners']);
    // The operator ignores the answers the policy refuses, judged again when it acts on them.
    expect(operatorConfig(separated).approvalSeparationOfDuties).toBe(true);
    expect(operatorConfig(await render()).approvalSeparationOfDuties).toBe(false);
  });

  it('refuses leader election off with more than one replica, and replaces the one pod with Recreate, never two at once', async () => {
    for (const replicas of ['2', '3']) {
      expect(await refusal('--set', 'leaderElection.enabled=false', '--set', `replicaCount=${replicas}`)).toMatch(
        new RegExp(`leaderElection\\.enabled is false with replicaCount ${replicas}.*set replicaCount=1`),
      );
    }
    // The default replicaCount is 2.
    expect(await refusal('--set', 'leaderElection.enabled=false')).toMatch(/replicaCount 2/);

    const single = await render('--set', 'leaderElection.enabled=false', '--set', 'replicaCount=1');
    expect(deployment(single).spec).toMatchObject({ replicas: 1, strategy: { type: 'Recreate' } });
    expect(deployment(single).spec.strategy.rollingUpdate).toBeUndefined();
    expect(operatorConfig(single).leaderElection.enabled).toBe(false);
    // With the lease, a rollout starts the new pod first: a standby waits for the lease.
    expect(deployment(await render()).spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
  });

  it("sizes the operator's /tmp for what the config lets its clones hold at once, so no run author can overfill it", async () => {
    const worstCaseMiB = (docs: Manifest[]) => {
      const config = operatorConfig(docs);
      const bytes = config.workerConcurrency * (4 * config.maxCheckoutBytes + 32 * MiB) + config.cloneCacheMaxBytes;
      return `${Math.ceil(bytes / MiB)}Mi`;
    };
    const defaults = await render();
    expect(tmpSizeLimit(defaults)).toBe(worstCaseMiB(defaults));
    expect(tmpSizeLimit(defaults)).toBe('33024Mi');
    const smaller = await render(
      '--set',
      `config.maxCheckoutBytes=${96 * MiB}`,
      '--set',
      'config.workerConcurrency=4',
      '--set',
      `config.cloneCacheMaxBytes=${1024 * MiB}`,
    );
    expect(tmpSizeLimit(smaller)).toBe(worstCaseMiB(smaller));
    expect(tmpSizeLimit(smaller)).toBe(`${4 * (4 * 96 + 32) + 1024}Mi`);
  });

  it('takes a tmpSizeLimit that holds the clones, and refuses one below them naming the values to change', async () => {
    expect(tmpSizeLimit(await render('--set', 'tmpSizeLimit=40Gi'))).toBe('40Gi');
    expect(tmpSizeLimit(await render('--set', 'tmpSizeLimit=4Gi', '--set', `config.maxCheckoutBytes=${96 * MiB}`))).toBe('4Gi');
    const below = await refusal('--set', 'tmpSizeLimit=4Gi');
    expect(below).toContain('tmpSizeLimit 4Gi is below what the clones of one replica may hold in /tmp at once');
    expect(below).toContain(
      'config.workerConcurrency (8) x (4 x config.maxCheckoutBytes (1073741824) + 32Mi) + config.cloneCacheMaxBytes (0) = 33024Mi',
    );
    // One byte short, in the decimal units a quantity may use: 8 x (4 x 96 MiB + 32 MiB) = 3489660928 bytes.
    expect(await refusal('--set-string', 'tmpSizeLimit=3489660927', '--set', `config.maxCheckoutBytes=${96 * MiB}`)).toMatch(/= 3328Mi/);
    expect(tmpSizeLimit(await render('--set-string', 'tmpSizeLimit=3489660928', '--set', `config.maxCheckoutBytes=${96 * MiB}`))).toBe(
      '3489660928',
    );
    expect(await refusal('--set', 'tmpSizeLimit=4.5Gi')).toMatch(/\/tmpSizeLimit/);
  });

  it('refuses a namespace state budget at which two namespaces would fill the bundled Redis, and takes it where it fits', async () => {
    // The defaults: two namespaces at the budget leave a quarter of maxmemory (512mb) to the queue.
    const defaults = operatorConfig(await render());
    expect(defaults.namespaceMaxStateBytes).toBe(192 * MiB);
    expect(2 * defaults.namespaceMaxStateBytes).toBeLessThanOrEqual((3 / 4) * 512 * MiB);

    const small = ['--set', 'redis.bundled.maxmemory=256mb'];
    const tooLarge = await refusal('--set', `config.namespaceMaxStateBytes=${192 * MiB}`, ...small);
    expect(tooLarge).toContain(
      "config.namespaceMaxStateBytes (201326592, 192Mi) is too large for the bundled Redis's redis.bundled.maxmemory (256mb)",
    );
    expect(tooLarge).toContain(
      'lower config.namespaceMaxStateBytes to at most 100663296, or raise redis.bundled.maxmemory to at least 512mb',
    );
    // Unset, the operator's own default (192 MiB) is what Redis must hold.
    expect(await refusal('--set', 'config.namespaceMaxStateBytes=null', ...small)).toMatch(/config\.namespaceMaxStateBytes \(201326592/);
    expect(await refusal('--set', `config.namespaceMaxStateBytes=${100 * MiB}`, ...small)).toMatch(/at most 100663296/);

    for (const fits of [
      ['--set', 'redis.bundled.maxmemory=512mb'],
      // One watched namespace: only its own budget has to fit.
      [...small, '--set', 'config.watchNamespaces={team-a}'],
      // An external Redis: its maxmemory is not the chart's to know.
      [...small, '--set', 'redis.urlSecretRef.name=redis-url'],
    ]) {
      const docs = await render('--set', `config.namespaceMaxStateBytes=${192 * MiB}`, ...fits);
      expect(operatorConfig(docs).namespaceMaxStateBytes).toBe(192 * MiB);
    }
    expect(
      await refusal('--set', `config.namespaceMaxStateBytes=${192 * MiB}`, ...small, '--set', 'config.watchNamespaces={team-a,team-b}'),
    ).toMatch(/two namespaces at that budget/);
  });
});

describe('an egress proxy of your own, named by config.egressProxy.service', () => {
  const proxyRbac = (docs: Manifest[]) =>
    docs.filter((doc) => (doc.kind === 'Role' || doc.kind === 'RoleBinding') && doc.metadata.name.endsWith('-egress-proxy-address'));
  const ownProxy = (...args: string[]) =>
    render('--set', 'config.egressProxy.service=my-proxy', '--set', `config.egressProxy.namespace=${PROXY_NAMESPACE}`, ...args);

  it('lets the operator get that Service alone, in the namespace the operator reads it from', async () => {
    const [role, binding] = proxyRbac(await ownProxy());
    expect(role).toMatchObject({
      kind: 'Role',
      metadata: { namespace: PROXY_NAMESPACE },
      rules: [{ apiGroups: [''], resources: ['services'], resourceNames: ['my-proxy'], verbs: ['get'] }],
    });
    expect(binding).toMatchObject({
      kind: 'RoleBinding',
      metadata: { namespace: PROXY_NAMESPACE },
      roleRef: { kind: 'Role', name: role!.metadata.name },
      subjects: [{ kind: 'ServiceAccount', name: `${RELEASE}-chamvi-operator`, namespace: NAMESPACE }],
    });
    // Without a namespace the operator reads the Service in its default one: so does the Role.
    const defaultNamespace = loadOperatorConfig({ egressProxy: { service: 'my-proxy' } }, {}).egressProxy.namespace;
    const [unnamed] = proxyRbac(await render('--set', 'config.egressProxy.service=my-proxy'));
    expect(unnamed!.metadata.namespace).toBe(defaultNamespace);
  });

  it('grants nothing where the operator reads no such Service: a fixed address, the chart-run proxy, or RBAC left to the admin', async () => {
    expect(proxyRbac(await ownProxy('--set', 'config.egressProxy.address=192.0.2.10'))).toEqual([]);
    expect(proxyRbac(await ownProxy('--set', 'rbac.create=false'))).toEqual([]);
    // The chart's proxy: its own -address Role, for its own Service in the release namespace.
    const bundled = proxyRbac(await ownProxy('--set', 'egressProxy.enabled=true')).find((doc) => doc.kind === 'Role')!;
    expect(bundled.metadata.namespace).toBe(NAMESPACE);
    expect(bundled.rules[0].resourceNames).toEqual([`${RELEASE}-chamvi-operator-egress-proxy`]);
  });

  describe('on the local control plane', () => {
    beforeAll(async () => {
      await createNamespace(PROXY_NAMESPACE);
      const objects = proxyRbac(await ownProxy());
      const applied = await kubectl(['apply', '-f', '-'], { input: objects.map((doc) => stringify(doc)).join('---\n') });
      expect(applied.code, applied.stderr).toBe(0);
    });

    afterAll(async () => {
      await deleteNamespace(PROXY_NAMESPACE);
    });

    it("lets the operator's ServiceAccount get the proxy Service and no other", async () => {
      const can = async (...args: string[]) =>
        (await kubectl(['auth', 'can-i', '--as', OPERATOR, '-n', PROXY_NAMESPACE, ...args])).stdout.trim();
      expect(await can('get', 'services/my-proxy')).toBe('yes');
      expect(await can('get', 'services/other')).toBe('no');
      expect(await can('list', 'services')).toBe('no');
    });
  });
});
