// Values that rendered a release which did not do what they said now fail `helm template`
// with a message naming what to change, or render what makes them work
// (templates/_config-checks.tpl chamvi.checkRelease): separation of duties without the approval
// policy that enforces it, leader election off under a rolling update of two pods, an operator
// /tmp a run author could overfill to evict the pod (with bytes, or with many small files), a
// namespace budget two namespaces fill the bundled Redis with, a Redis memory limit that kills it
// before its maxmemory refuses writes, and an egress proxy Service of your own that the operator
// may not read or whose namespace the chart would guess.
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
/** The bytes a clone may hold on disk beyond its files' sizes: a 4 KiB block in the tree and a tar header and padding, each file. */
const PER_FILE = 4096 + 1024;
/** The default sizeLimit for these limits, without a clone cache. */
const worstCaseOf = (workers: number, checkoutBytes: number, files: number) =>
  `${Math.max(4096, Math.ceil((workers * (4 * checkoutBytes + 32 * MiB + files * PER_FILE)) / MiB))}Mi`;

describe('the chart refuses values that render a release that does not do what they say', () => {
  it('refuses separation of duties without the approval policy that enforces it, and renders both policies with it', async () => {
    expect(await refusal('--set', 'approvalPolicy.enabled=false', '--set', 'approvalPolicy.separationOfDuties=true')).toMatch(
      /approvalPolicy\.separationOfDuties is true but approvalPolicy\.enabled is false.*set approvalPolicy\.enabled=true/,
    );
    const separated = await render('--set', 'approvalPolicy.separationOfDuties=true');
    const policies = separated
      .filter((doc) => doc.kind === 'ValidatingAdmissionPolicy')
      .map((doc) => doc.metadata.name.replace(`${RELEASE}-chamvi-operator-`, ''));
    expect(policies.sort()).toEqual(['allow-repo', 'approvals', 'operator-writes', 'run-owners']);
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
      const perClone = 4 * config.maxCheckoutBytes + 32 * MiB + config.maxCheckoutFiles * PER_FILE;
      const bytes = config.workerConcurrency * perClone + config.cloneCacheMaxBytes;
      return `${Math.max(4096, Math.ceil(bytes / MiB))}Mi`;
    };
    const defaults = await render();
    expect(tmpSizeLimit(defaults)).toBe(worstCaseMiB(defaults));
    expect(tmpSizeLimit(defaults)).toBe('42790Mi');
    const smaller = await render(
      '--set',
      `config.maxCheckoutBytes=${96 * MiB}`,
      '--set',
      'config.workerConcurrency=4',
      '--set',
      `config.cloneCacheMaxBytes=${1024 * MiB}`,
    );
    expect(tmpSizeLimit(smaller)).toBe(worstCaseMiB(smaller));
    expect(tmpSizeLimit(smaller)).toBe(`${Math.ceil((4 * ((4 * 96 + 32) * MiB + 250_000 * PER_FILE) + 1024 * MiB) / MiB)}Mi`);
  });

  it('counts the disk a checkout of many tiny files takes, which its byte limit does not see', async () => {
    // 250 000 one-byte files are 250 KB of checkout, but a block each in the tree (about 1 GiB)
    // and a header each in the archive (about 250 MiB): at a 16 MiB maxCheckoutBytes the sum of
    // the bytes alone was 768Mi, and one such run per worker passed it.
    const docs = await render('--set', `config.maxCheckoutBytes=${16 * MiB}`);
    const config = operatorConfig(docs);
    expect(config.maxCheckoutFiles).toBe(250_000);
    const limitBytes = Number(tmpSizeLimit(docs).replace(/Mi$/, '')) * MiB;
    expect(limitBytes).toBeGreaterThanOrEqual(
      config.workerConcurrency * (4 * config.maxCheckoutBytes + 32 * MiB + config.maxCheckoutFiles * PER_FILE),
    );
    expect(limitBytes).toBeGreaterThanOrEqual(config.workerConcurrency * config.maxCheckoutFiles * PER_FILE);
    // Fewer files, less disk.
    const fewer = await render('--set', `config.maxCheckoutBytes=${16 * MiB}`, '--set', 'config.maxCheckoutFiles=100000');
    expect(tmpSizeLimit(fewer)).toBe(worstCaseOf(8, 16 * MiB, 100_000));
    // Small limits keep the chart's earlier fixed 4Gi, room for what the sum leaves out (long paths, git's index).
    const tiny = await render(
      '--set',
      `config.maxCheckoutBytes=${MiB}`,
      '--set',
      'config.maxCheckoutFiles=1000',
      '--set',
      'config.workerConcurrency=1',
    );
    expect(tmpSizeLimit(tiny)).toBe('4096Mi');
  });

  it('takes a tmpSizeLimit that holds the clones, and refuses one below them naming the values to change', async () => {
    expect(tmpSizeLimit(await render('--set', 'tmpSizeLimit=48Gi'))).toBe('48Gi');
    const small = [
      '--set',
      `config.maxCheckoutBytes=${96 * MiB}`,
      '--set',
      'config.maxCheckoutFiles=50000',
      '--set',
      'config.workerConcurrency=4',
    ];
    expect(tmpSizeLimit(await render('--set', 'tmpSizeLimit=4Gi', ...small))).toBe('4Gi');
    const below = await refusal('--set', 'tmpSizeLimit=40Gi');
    expect(below).toContain('tmpSizeLimit 40Gi is below what the clones of one replica may hold in /tmp at once');
    expect(below).toContain(
      'config.workerConcurrency (8) x (4 x config.maxCheckoutBytes (1073741824) + 32Mi + config.maxCheckoutFiles (250000) x 5120) + config.cloneCacheMaxBytes (0) = 42790Mi',
    );
    // Many small files alone: 96 MiB of checkout, but 250 000 files of it.
    expect(await refusal('--set', 'tmpSizeLimit=4Gi', '--set', `config.maxCheckoutBytes=${96 * MiB}`)).toMatch(/= 13094Mi/);
    // One byte short, in the decimal units a quantity may use: 4 x (4 x 96 MiB + 32 MiB + 50000 x 5120) = 2768830464 bytes.
    expect(await refusal('--set-string', 'tmpSizeLimit=2768830463', ...small)).toMatch(/= 2641Mi/);
    // Set, a size that holds the sum is taken below the default's 4Gi floor: the choice is the admin's.
    expect(tmpSizeLimit(await render('--set-string', 'tmpSizeLimit=2768830464', ...small))).toBe('2768830464');
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

  it('refuses a bundled Redis whose memory limit is below one and a half times its maxmemory, and takes one at or above it', async () => {
    const redis = (docs: Manifest[]) => docs.find((doc) => doc.kind === 'StatefulSet' && doc.metadata.name.endsWith('-redis'))!;
    const container = (docs: Manifest[]) => redis(docs).spec.template.spec.containers[0];
    // The defaults: 768Mi is 512mb and half as much again.
    expect(container(await render()).resources.limits.memory).toBe('768Mi');

    // maxmemory raised alone: Redis would be killed at 768Mi before noeviction refused a write at 1 GiB.
    const raised = await refusal('--set', 'redis.bundled.maxmemory=1gb');
    expect(raised).toContain(
      'redis.bundled.resources.limits.memory (768Mi, 768Mi) is below one and a half times redis.bundled.maxmemory (1gb, 1024Mi)',
    );
    expect(raised).toContain(
      'set redis.bundled.resources.limits.memory to at least 1536Mi, or lower redis.bundled.maxmemory to at most 512mb',
    );

    const withLimit = (limit: string) => [
      '--set',
      'redis.bundled.maxmemory=1gb',
      '--set-string',
      `redis.bundled.resources.limits.memory=${limit}`,
    ];
    for (const fits of ['1536Mi', '1.5Gi', '1610612736', '1611M', '2Gi']) {
      const docs = await render(...withLimit(fits));
      expect(container(docs).resources.limits.memory).toBe(fits);
      expect(container(docs).args.join(' ')).toContain('--maxmemory 1gb');
    }
    // One byte short, and the decimal units of both sides: Redis's gb is 1024-based, Kubernetes's M 1000-based.
    for (const short of ['1610612735', '1610M', '1535Mi', '1.4Gi']) {
      expect(await refusal(...withLimit(short))).toMatch(/is below one and a half times redis\.bundled\.maxmemory \(1gb, 1024Mi\)/);
    }
    expect(
      await refusal('--set-string', 'redis.bundled.maxmemory=1073741824', '--set', 'redis.bundled.resources.limits.memory=1Gi'),
    ).toMatch(/limits\.memory \(1Gi, 1024Mi\) is below one and a half times redis\.bundled\.maxmemory \(1073741824, 1024Mi\)/);
    // No limit: none to be killed at. An external Redis: its memory is not the chart's to know.
    await render('--set', 'redis.bundled.maxmemory=1gb', '--set', 'redis.bundled.resources.limits=null');
    await render('--set', 'redis.bundled.maxmemory=1gb', '--set', 'redis.urlSecretRef.name=redis-url');
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
  });

  it('refuses the Service without its namespace, rather than put the Role in a namespace the release may not own', async () => {
    // Unset, the operator would read the Service in its own default namespace: not the release's.
    const defaultNamespace = loadOperatorConfig({ egressProxy: { service: 'my-proxy' } }, {}).egressProxy.namespace;
    expect(defaultNamespace).not.toBe(NAMESPACE);
    for (const args of [[], ['--set', 'rbac.create=false']]) {
      const unnamed = await refusal('--set', 'config.egressProxy.service=my-proxy', ...args);
      expect(unnamed).toContain('config.egressProxy.service (my-proxy) is set without config.egressProxy.namespace');
      expect(unnamed).toContain(`in its default namespace, ${defaultNamespace}`);
      expect(unnamed).toContain(`Set config.egressProxy.namespace (${NAMESPACE} where the proxy runs beside the operator)`);
    }
    // Named, the Role goes where it says, the release's namespace included.
    const [role] = proxyRbac(
      await render('--set', 'config.egressProxy.service=my-proxy', '--set', `config.egressProxy.namespace=${NAMESPACE}`),
    );
    expect(role!.metadata.namespace).toBe(NAMESPACE);
    // No Service read: a fixed address; the chart's own proxy, whose namespace the chart sets.
    await render('--set', 'config.egressProxy.service=my-proxy', '--set', 'config.egressProxy.address=192.0.2.10');
    await render('--set', 'config.egressProxy.service=my-proxy', '--set', 'egressProxy.enabled=true');
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
