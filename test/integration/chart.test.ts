// The Helm chart against the real helm and the local control plane: it lints clean, bad
// values fail with a message, its config is one the operator accepts, it installs, its
// ServiceAccount may do what the operator does and not more, and its admission policy refuses
// a disallowed repository at `kubectl apply` while admitting an allowed one. That the
// ClusterRole grants exactly the verbs the operator uses is test/e2e/rbac.test.ts's: it
// derives them from the API server's audit log of real runs, not from a list kept here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml, stringify } from 'yaml';
import { CHART_OWNED_CONFIG_KEYS } from '../../operator/src/config/chart-values-schema.ts';
import { loadOperatorConfig, operatorConfigSchema } from '../../operator/src/config/operator-config.ts';
import { createNamespace, deleteNamespace, kubectl } from '../support/cluster.ts';
import { chartDir, helm } from '../support/helm.ts';
import { operatorNodeOptions } from '../support/operator-node-flags.ts';

const repoCrd = new URL('../../crds/chamvi.dev_codingruns.yaml', import.meta.url);
const NAMESPACE = 'chamvi-chart-test';
const RUNS_NAMESPACE = 'chamvi-chart-runs';
const RELEASE = 'chart-test';

const template = (...args: string[]) => helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...args]);

interface Manifest {
  kind: string;
  metadata: { name: string };
  [key: string]: any;
}
const manifests = (text: string): Manifest[] =>
  parseAllDocuments(text)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);

const namespaceOf = (doc: Manifest): string | undefined => (doc.metadata as { namespace?: string }).namespace;

const codingRun = (name: string, url: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace: RUNS_NAMESPACE },
  spec: { task: 'Fix it', repository: { url }, model: { provider: 'scripted', scriptRef: { name: 'script' } } },
});

describe('the chart, offline', () => {
  it('passes helm lint --strict', async () => {
    const result = await helm(['lint', '--strict', chartDir]);
    expect(result.stdout + result.stderr).not.toMatch(/\[(WARNING|ERROR)\]/);
    expect(result.code).toBe(0);
  });

  it('ships the generated CRD unchanged (make chart-sync copies it into files/crd)', () => {
    expect(readFileSync(join(chartDir, 'files/crd/chamvi.dev_codingruns.yaml'), 'utf8')).toBe(readFileSync(repoCrd, 'utf8'));
    expect(readFileSync(join(chartDir, 'files/crd/chamvi.dev_codingevals.yaml'), 'utf8')).toBe(
      readFileSync(new URL('../../crds/chamvi.dev_codingevals.yaml', import.meta.url), 'utf8'),
    );
  });

  it('renders the CRD as a template Helm upgrades and uninstall keeps, unless crds.install is off', async () => {
    const crd = manifests((await template()).stdout).find((doc) => doc.kind === 'CustomResourceDefinition');
    expect(crd?.metadata).toMatchObject({ name: 'codingruns.chamvi.dev', annotations: { 'helm.sh/resource-policy': 'keep' } });
    expect(crd?.spec).toEqual(parseYaml(readFileSync(repoCrd, 'utf8')).spec);
    const without = manifests((await template('--set', 'crds.install=false')).stdout);
    expect(without.some((doc) => doc.kind === 'CustomResourceDefinition')).toBe(false);
  });

  it.each([
    [['--set', 'config.workerConcurrency=0'], /workerConcurrency/],
    [['--set', 'replicaCount=-1'], /replicaCount/],
    [['--set', 'redis.url=http://redis:6379'], /redis/],
    [['--set', 'config.allowRepo[0]=https://github.com/acme/ x'], /allowRepo/],
    [['--set', 'config.alowRepo[0]=https://github.com/acme/*'], /alowRepo/],
    [['--set', 'logLevel=loud'], /logLevel/],
    // From the schema generated out of operator-config.ts (make chart-schema):
    [['--set', 'config.allowModelEndpoints[0]=https://key@llm.internal/v1'], /allowModelEndpoints/],
    [['--set', 'config.watchNamespaces[0]=Team_A'], /watchNamespaces/],
    [['--set', 'config.maxCheckoutBytes=1024'], /maxCheckoutBytes/],
    [['--set', 'config.isolationProbe.settleSeconds=0'], /settleSeconds/],
    [['--set', 'config.stateKey=0123456789abcdef0123456789abcdef'], /stateKey/],
    // It makes every run's proxy credential: a Secret's, never the ConfigMap's (extraEnv for an external proxy).
    [['--set', 'config.egressKey=0123456789abcdef0123456789abcdef'], /egressKey/],
    // Set from approvalPolicy.separationOfDuties, so the operator and the policy judge answers alike.
    [['--set', 'config.approvalSeparationOfDuties=true'], /approvalSeparationOfDuties/],
  ])('fails helm template %j with a message naming the value', async (args, message) => {
    const result = await template(...args);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/values don't meet the specifications of the schema/);
    expect(result.stderr).toMatch(message);
  });

  it('renders a config file the operator accepts, wired to the bundled Redis and the release namespace', async () => {
    const result = await template('--set', 'config.allowRepo={https://github.com/acme/*}', '--set', 'config.maxActiveRuns=7');
    expect(result.stderr).toBe('');
    const configMap = manifests(result.stdout).find((doc) => doc.kind === 'ConfigMap')!;
    const config = loadOperatorConfig(parseYaml(configMap.data['config.yaml'] as string), {});
    expect(config.allowRepo).toEqual(['https://github.com/acme/*']);
    expect(config.maxActiveRuns).toBe(7);
    expect(config.redisUrl).toBe(`redis://${RELEASE}-chamvi-operator-redis.${NAMESPACE}.svc:6379`);
    expect(config.leaderElection).toMatchObject({ enabled: true, namespace: NAMESPACE, leaseName: `${RELEASE}-chamvi-operator` });
  });

  it('lets values set every operator config key the chart does not fill in itself', () => {
    const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as {
      properties: { config: { properties: object } };
    };
    const settable = Object.keys(schema.properties.config.properties);
    // redisUrl, httpPort and leaderElection come from their own sections; identity is the pod name.
    // Security #11.1: redisPassword and stateKey come from Secrets as env (never the ConfigMap),
    // redisCaFile from redis.caSecretRef.
    const chartOwned: readonly string[] = CHART_OWNED_CONFIG_KEYS;
    const operatorKeys = Object.keys(operatorConfigSchema.shape).filter((key) => !chartOwned.includes(key));
    expect(operatorKeys.filter((key) => !settable.includes(key))).toEqual([]);
  });

  it('runs a restricted operator Deployment with two replicas, probes on httpPort and the config mounted', async () => {
    const docs = manifests((await template()).stdout);
    const deployment = docs.find((doc) => doc.kind === 'Deployment')!;
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    expect(deployment.spec.replicas).toBe(2);
    expect(pod.automountServiceAccountToken).toBe(true);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.ports[0]).toMatchObject({ name: 'http', containerPort: 8080 });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.args).toEqual(['--config', '/etc/chamvi/config.yaml']);
    expect(container.resources.limits.memory).toBeDefined();
  });

  it('restarts the egress proxy when what its ConfigMap holds changes: allowEgress and watchNamespaces too, which it reads once', async () => {
    const checksum = async (...args: string[]) => {
      const docs = manifests((await template('--set', 'egressProxy.enabled=true', ...args)).stdout);
      const proxy = docs.find((doc) => doc.kind === 'Deployment' && doc.metadata.name.endsWith('-egress-proxy'))!;
      return proxy.spec.template.metadata.annotations['checksum/config'] as string;
    };
    const before = await checksum('--set', 'config.allowEgress[0]=*');
    expect(await checksum('--set', 'config.allowEgress[0]=registry.npmjs.org')).not.toBe(before);
    expect(await checksum('--set', 'config.allowEgress[0]=*', '--set', 'config.watchNamespaces[0]=team-a')).not.toBe(before);
    expect(await checksum('--set', 'config.allowEgress[0]=*')).toBe(before);
  });

  it("gives the egress proxy the API server's real endpoints an admin lists, and refuses one that is not address:port", async () => {
    const proxyConfig = async (...args: string[]) => {
      const docs = manifests((await template('--set', 'egressProxy.enabled=true', ...args)).stdout);
      const configMap = docs.find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name.endsWith('-egress-proxy'))!;
      return parseYaml(configMap.data['config.yaml'] as string) as { apiServerAddresses: string[] };
    };
    expect((await proxyConfig()).apiServerAddresses).toEqual([]);
    expect((await proxyConfig('--set', 'egressProxy.apiServerAddresses={34.118.0.10:443}')).apiServerAddresses).toEqual([
      '34.118.0.10:443',
    ]);
    const refused = await template('--set', 'egressProxy.enabled=true', '--set', 'egressProxy.apiServerAddresses={34.118.0.10}');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('apiServerAddresses');
  });

  it("binds the release's admission policies to its watchNamespaces, so another release's runs are not judged by its lists", async () => {
    const bindings = async (...args: string[]) =>
      manifests((await template('--set', 'approvalPolicy.separationOfDuties=true', ...args)).stdout)
        .filter((doc) => doc.kind === 'ValidatingAdmissionPolicyBinding')
        .map((doc) => [doc.metadata.name.replace(`${RELEASE}-chamvi-operator-`, ''), doc.spec.matchResources?.namespaceSelector]);
    const watched = { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a', 'team-b'] }] };
    expect(await bindings('--set', 'config.watchNamespaces={team-a,team-b}')).toEqual([
      ['allow-repo', watched],
      ['approvals', watched],
      ['run-owners', watched],
      // The operator's own writes are fenced wherever it can write (RBAC's reach, not the watch).
      ['operator-writes', undefined],
    ]);
    // Watching every namespace: every namespace; a selector given wins.
    expect((await bindings()).map(([, selector]) => selector)).toEqual([undefined, undefined, undefined, undefined]);
    const given = await bindings(
      '--set',
      'config.watchNamespaces={team-a}',
      '--set',
      'admissionPolicy.namespaceSelector.matchLabels.team=a',
    );
    expect(given[0]).toEqual(['allow-repo', { matchLabels: { team: 'a' } }]);
  });

  it('gives the people who use runs the kinds that make runs too: schedules, templates and evals, through view and edit', async () => {
    const roles = manifests((await template()).stdout).filter((doc) => doc.kind === 'ClusterRole');
    const rulesOf = (name: string) =>
      roles.find((role) => role.metadata.name === name)!.rules as Array<{ resources: string[]; verbs: string[] }>;
    const may = (name: string, resource: string, verb: string) =>
      rulesOf(name).some((rule) => rule.resources.includes(resource) && rule.verbs.includes(verb));
    for (const resource of ['codingschedules', 'codingruntemplates', 'codingevals']) {
      expect(may('chamvi-view', resource, 'list')).toBe(true);
      expect(may('chamvi-view', resource, 'create')).toBe(false);
      expect(may('chamvi-edit', resource, 'create')).toBe(true);
      expect(may('chamvi-edit', resource, 'approve')).toBe(false);
    }
  });

  it('keeps one egress proxy up through node drains, as it keeps one operator replica', async () => {
    const budgets = async (...args: string[]) =>
      manifests((await template(...args)).stdout)
        .filter((doc) => doc.kind === 'PodDisruptionBudget')
        .map((doc) => [doc.metadata.name, doc.spec.minAvailable, doc.spec.selector.matchLabels['app.kubernetes.io/name']]);
    expect(await budgets('--set', 'egressProxy.enabled=true')).toEqual([
      [`${RELEASE}-chamvi-operator`, 1, 'chamvi-operator'],
      [`${RELEASE}-chamvi-operator-egress-proxy`, 1, 'chamvi-egress-proxy'],
    ]);
    // One replica: a budget would block every drain.
    expect(await budgets('--set', 'egressProxy.enabled=true', '--set', 'egressProxy.replicaCount=1')).toHaveLength(1);
    expect(await budgets()).toHaveLength(1);
  });

  it('lets OpenShift assign the Redis and proxy pods their user, as the operator pod', async () => {
    const podsOf = async (...args: string[]) => {
      const docs = manifests((await template('--set', 'egressProxy.enabled=true', ...args)).stdout);
      const redis = docs.find((doc) => doc.kind === 'StatefulSet')!.spec.template.spec.securityContext;
      const proxy = docs.find((doc) => doc.kind === 'Deployment' && doc.metadata.name.endsWith('-egress-proxy'))!.spec.template.spec
        .securityContext;
      return { redis, proxy };
    };
    expect(await podsOf()).toEqual({
      redis: { runAsNonRoot: true, runAsUser: 999, runAsGroup: 999, fsGroup: 999, seccompProfile: { type: 'RuntimeDefault' } },
      proxy: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
    });
    const unset = ['runAsUser', 'runAsGroup'].flatMap((key) => [
      '--set',
      `redis.bundled.podSecurityContext.${key}=null`,
      '--set',
      `egressProxy.podSecurityContext.${key}=null`,
    ]);
    expect(await podsOf(...unset, '--set', 'redis.bundled.podSecurityContext.fsGroup=null')).toEqual({
      redis: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      proxy: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    });
  });

  it('names the bundled Redis StatefulSet so its pods can be made with the longest full name, and gives them the pull secrets', async () => {
    const fullname = 'a'.repeat(52);
    const docs = manifests((await template('--set', `fullnameOverride=${fullname}`, '--set', 'imagePullSecrets[0].name=mirror')).stdout);
    const redis = docs.find((doc) => doc.kind === 'StatefulSet')!;
    // Its pods' controller-revision-hash label is <name>-<hash of up to 10>: at most 63.
    expect(redis.metadata.name.length + 1 + 10).toBeLessThanOrEqual(63);
    expect(redis.spec.template.spec.imagePullSecrets).toEqual([{ name: 'mirror' }]);
    // Its Service keeps the full name the operator's redisUrl names.
    expect(docs.find((doc) => doc.kind === 'Service' && doc.metadata.name === `${fullname}-redis`)).toBeDefined();
  });

  it("caps the operator's heap as the image does, at heapLimitMiB when set, and refuses a limit too small to run", async () => {
    const nodeOptions = async (...args: string[]) =>
      manifests((await template(...args)).stdout)
        .find((doc) => doc.kind === 'Deployment')!
        .spec.template.spec.containers[0].env.find((env: { name: string }) => env.name === 'NODE_OPTIONS')?.value;
    expect(await nodeOptions()).toBe(operatorNodeOptions());
    expect(await nodeOptions('--set', 'heapLimitMiB=384')).toBe('--enable-source-maps --max-old-space-size=384');
    const refused = await template('--set', 'heapLimitMiB=16');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/heapLimitMiB/);
  });

  it('bundles Redis with AOF and noeviction unless an external URL is given', async () => {
    const bundled = manifests((await template()).stdout).find((doc) => doc.kind === 'StatefulSet')!;
    const args: string[] = bundled.spec.template.spec.containers[0].args;
    expect(args.join(' ')).toContain('--appendonly yes');
    expect(args.join(' ')).toContain('--maxmemory-policy noeviction');

    const external = manifests((await template('--set', 'redis.url=rediss://redis.example:6380')).stdout);
    expect(external.some((doc) => doc.kind === 'StatefulSet')).toBe(false);
    const config = parseYaml(external.find((doc) => doc.kind === 'ConfigMap')!.data['config.yaml']);
    expect(config.redisUrl).toBe('rediss://redis.example:6380');

    const fromSecret = manifests((await template('--set', 'redis.urlSecretRef.name=redis-auth')).stdout);
    expect(fromSecret.some((doc) => doc.kind === 'StatefulSet')).toBe(false);
    const env = fromSecret.find((doc) => doc.kind === 'Deployment')!.spec.template.spec.containers[0].env;
    expect(env).toContainEqual({ name: 'REDIS_URL', valueFrom: { secretKeyRef: { name: 'redis-auth', key: 'url' } } });
  });
});

describe("the egress proxy's read of the API server's own EndpointSlice", () => {
  const proxyAccount = `system:serviceaccount:${NAMESPACE}:${RELEASE}-chamvi-operator-egress-proxy`;
  const sliceRbac = async (...args: string[]) =>
    manifests((await template('--set', 'egressProxy.enabled=true', ...args)).stdout).filter(
      (doc) => (doc.kind === 'Role' || doc.kind === 'RoleBinding') && namespaceOf(doc) === 'default',
    );

  it('grants the proxy get, list and watch on the slice named kubernetes in default, and nothing else there', async () => {
    for (const args of [[], ['--set', 'config.watchNamespaces={team-a}']]) {
      const [role, binding] = await sliceRbac(...args);
      expect(role).toMatchObject({
        kind: 'Role',
        metadata: { namespace: 'default' },
        rules: [
          {
            apiGroups: ['discovery.k8s.io'],
            resources: ['endpointslices'],
            resourceNames: ['kubernetes'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      });
      expect(role!.rules).toHaveLength(1);
      expect(binding).toMatchObject({
        kind: 'RoleBinding',
        metadata: { namespace: 'default' },
        roleRef: { kind: 'Role', name: role!.metadata.name },
        subjects: [{ kind: 'ServiceAccount', name: `${RELEASE}-chamvi-operator-egress-proxy`, namespace: NAMESPACE }],
      });
    }
    expect(manifests((await template()).stdout).filter((doc) => namespaceOf(doc) === 'default')).toEqual([]);
  });

  it("names its Role after the release's namespace too, so two releases of one name do not share it", async () => {
    const [role] = await sliceRbac();
    expect(role!.metadata.name).toContain(NAMESPACE);
    const other = manifests(
      (await helm(['template', RELEASE, chartDir, '--namespace', 'elsewhere', '--set', 'egressProxy.enabled=true'])).stdout,
    ).find((doc) => doc.kind === 'Role' && namespaceOf(doc) === 'default');
    expect(other!.metadata.name).not.toBe(role!.metadata.name);
    // Cut to 63 characters, names stay apart by their hash.
    const long = (namespace: string) =>
      helm(['template', 'r'.repeat(40), chartDir, '--namespace', namespace, '--set', 'egressProxy.enabled=true']).then(
        (result) => manifests(result.stdout).find((doc) => doc.kind === 'Role' && namespaceOf(doc) === 'default')!.metadata.name,
      );
    const [first, second] = await Promise.all([long(`${'n'.repeat(50)}-a`), long(`${'n'.repeat(50)}-b`)]);
    for (const name of [first, second]) expect(name).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    expect(first).not.toBe(second);
  });

  it('with readApiServerEndpoints false, renders nothing outside the release and watched namespaces', async () => {
    for (const args of [[], ['--set', 'config.watchNamespaces={team-a,team-b}']]) {
      const docs = manifests(
        (await template('--set', 'egressProxy.enabled=true', '--set', 'egressProxy.readApiServerEndpoints=false', ...args)).stdout,
      );
      expect(docs.some((doc) => doc.kind === 'Deployment' && doc.metadata.name.endsWith('-egress-proxy'))).toBe(true);
      const allowed = new Set([NAMESPACE, ...(args.length > 0 ? ['team-a', 'team-b'] : [])]);
      const outside = docs.filter((doc) => namespaceOf(doc) !== undefined && !allowed.has(namespaceOf(doc)!));
      expect(outside.map((doc) => `${doc.kind} ${namespaceOf(doc)}/${doc.metadata.name}`)).toEqual([]);
    }
  });

  describe('on the local control plane', () => {
    let applied = '';
    beforeAll(async () => {
      applied = (await sliceRbac()).map((doc) => stringify(doc)).join('---\n');
      const result = await kubectl(['apply', '-f', '-'], { input: applied });
      expect(result.code, result.stderr).toBe(0);
    });

    afterAll(async () => {
      await kubectl(['delete', '-f', '-', '--ignore-not-found'], { input: applied });
    });

    it('lets the proxy watch that slice by name, and read no other', async () => {
      const can = async (...args: string[]) =>
        (await kubectl(['auth', 'can-i', '--as', proxyAccount, '-n', 'default', ...args])).stdout.trim();
      for (const verb of ['get', 'list', 'watch']) expect(await can(verb, 'endpointslices.discovery.k8s.io/kubernetes')).toBe('yes');
      expect(await can('get', 'endpointslices.discovery.k8s.io/other')).toBe('no');
      expect(await can('list', 'endpointslices.discovery.k8s.io')).toBe('no');
      expect(await can('get', 'services/kubernetes')).toBe('no');
    });
  });
});

describe('the chart on the local control plane', () => {
  beforeAll(async () => {
    await createNamespace(RUNS_NAMESPACE);
    const install = await helm([
      'install',
      RELEASE,
      chartDir,
      '--namespace',
      NAMESPACE,
      '--create-namespace',
      '--set',
      'config.allowRepo={https://github.com/acme/*,https://git.example.com/**}',
      '--set',
      'admissionPolicy.enabled=true',
      // Only in this test's namespace: other test files apply runs with other repositories.
      '--set',
      `admissionPolicy.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=${RUNS_NAMESPACE}`,
      '--set',
      'redis.bundled.persistence.enabled=false',
      // The test control plane applied crds/ itself: the mode of a cluster that manages the CRD.
      '--set',
      'crds.install=false',
    ]);
    expect(install.stderr).not.toMatch(/Error/);
    expect(install.code).toBe(0);
    expect(install.stdout).toContain('kubectl get crun');
  });

  afterAll(async () => {
    await helm(['uninstall', RELEASE, '--namespace', NAMESPACE]);
    await deleteNamespace(RUNS_NAMESPACE);
    await deleteNamespace(NAMESPACE);
  });

  it('lets the ServiceAccount do what the operator does, and nothing more', async () => {
    const as = `system:serviceaccount:${NAMESPACE}:${RELEASE}-chamvi-operator`;
    const can = async (...args: string[]) => (await kubectl(['auth', 'can-i', '--as', as, ...args])).stdout.trim();
    expect(await can('create', 'pods', '--subresource=exec', '-n', RUNS_NAMESPACE)).toBe('yes');
    expect(await can('patch', 'codingruns.chamvi.dev', '--subresource=status', '-n', RUNS_NAMESPACE)).toBe('yes');
    // The leader lease: its own, by name (configmap.yaml's leaseName), and no other lease beside it.
    const lease = `leases.coordination.k8s.io/${RELEASE}-chamvi-operator`;
    expect(await can('get', lease, '-n', NAMESPACE)).toBe('yes');
    expect(await can('update', lease, '-n', NAMESPACE)).toBe('yes');
    expect(await can('create', 'leases.coordination.k8s.io', '-n', NAMESPACE)).toBe('yes');
    expect(await can('update', 'leases.coordination.k8s.io/another-controller', '-n', NAMESPACE)).toBe('no');
    expect(await can('get', 'leases.coordination.k8s.io/another-controller', '-n', NAMESPACE)).toBe('no');
    expect(await can('update', lease, '-n', RUNS_NAMESPACE)).toBe('no');
    expect(await can('list', 'secrets', '-n', RUNS_NAMESPACE)).toBe('no');
    // CodingSchedules create runs; templates are read, never written.
    expect(await can('create', 'codingruns.chamvi.dev', '-n', RUNS_NAMESPACE)).toBe('yes');
    expect(await can('update', 'codingschedules.chamvi.dev', '--subresource=status', '-n', RUNS_NAMESPACE)).toBe('yes');
    expect(await can('get', 'codingruntemplates.chamvi.dev', '-n', RUNS_NAMESPACE)).toBe('yes');
    expect(await can('update', 'codingruntemplates.chamvi.dev', '-n', RUNS_NAMESPACE)).toBe('no');
    expect(await can('update', 'codingschedules.chamvi.dev', '-n', RUNS_NAMESPACE)).toBe('no');
    // A CodingEval's runs are created by the operator too; its status is written, the eval never.
    expect(await can('update', 'codingevals.chamvi.dev', '--subresource=status', '-n', RUNS_NAMESPACE)).toBe('yes');
    expect(await can('create', 'codingevals.chamvi.dev', '-n', RUNS_NAMESPACE)).toBe('no');
    expect(await can('create', 'deployments.apps', '-n', RUNS_NAMESPACE)).toBe('no');
  });

  it('creates the operator Deployment, its ConfigMap and the bundled Redis', async () => {
    const result = await kubectl(['get', 'deployment,configmap,statefulset,service,poddisruptionbudget', '-n', NAMESPACE, '-o', 'name']);
    expect(result.stdout.split('\n')).toEqual(
      expect.arrayContaining([
        `deployment.apps/${RELEASE}-chamvi-operator`,
        `configmap/${RELEASE}-chamvi-operator-config`,
        `statefulset.apps/${RELEASE}-chamvi-operator-redis`,
        `service/${RELEASE}-chamvi-operator-redis`,
        `service/${RELEASE}-chamvi-operator-metrics`,
        `poddisruptionbudget.policy/${RELEASE}-chamvi-operator`,
      ]),
    );
  });

  it('refuses a disallowed repository at kubectl apply with a readable message, and admits allowed ones', async () => {
    // The API server loads a new policy and binding asynchronously: wait until it bites.
    let refused = await kubectl(['apply', '-f', '-'], { input: stringify(codingRun('evil', 'https://github.com.evil.io/acme/x.git')) });
    for (let attempt = 0; attempt < 60 && refused.code === 0; attempt++) {
      await kubectl(['delete', 'codingrun', 'evil', '-n', RUNS_NAMESPACE, '--ignore-not-found']);
      await new Promise((resolve) => setTimeout(resolve, 500));
      refused = await kubectl(['apply', '-f', '-'], { input: stringify(codingRun('evil', 'https://github.com.evil.io/acme/x.git')) });
    }
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('repository https://github.com.evil.io/acme/x.git is not allowed');
    expect(refused.stderr).toContain('https://github.com/acme/*');

    const nested = await kubectl(['apply', '-f', '-'], { input: stringify(codingRun('nested', 'https://github.com/acme/team/x.git')) });
    expect(nested.code).not.toBe(0);
    expect(nested.stderr).toContain('is not allowed');

    for (const [name, url] of [
      ['allowed', 'https://github.com/acme/webapp.git'],
      ['deep', 'https://git.example.com/a/b/c.git'],
    ] as const) {
      const admitted = await kubectl(['apply', '-f', '-'], { input: stringify(codingRun(name, url)) });
      expect(admitted.stderr).toBe('');
      expect(admitted.code).toBe(0);
    }
  });

  it('with an empty allowRepo, refuses every run and says how to allow repositories', async () => {
    const namespace = 'chamvi-chart-empty';
    await createNamespace(namespace);
    const rendered = await template(
      '--set',
      'fullnameOverride=chart-empty',
      '--set',
      'admissionPolicy.enabled=true',
      '--set',
      `admissionPolicy.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=${namespace}`,
      '--show-only',
      'templates/admission-policy.yaml',
    );
    expect(rendered.code).toBe(0);
    const applied = await kubectl(['apply', '-f', '-'], { input: rendered.stdout });
    expect(applied.stderr).toBe('');
    try {
      const run = { ...codingRun('any', 'https://github.com/acme/webapp.git'), metadata: { name: 'any', namespace } };
      let refused = await kubectl(['create', '-f', '-'], { input: JSON.stringify(run) });
      for (let attempt = 0; attempt < 60 && refused.code === 0; attempt++) {
        await kubectl(['delete', 'codingrun', 'any', '-n', namespace, '--ignore-not-found']);
        await new Promise((resolve) => setTimeout(resolve, 500));
        refused = await kubectl(['create', '-f', '-'], { input: JSON.stringify(run) });
      }
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(
        "no repository is allowed yet: a cluster admin must add a pattern such as https://github.com/acme/* to the chamvi-operator chart's config.allowRepo",
      );
    } finally {
      await kubectl(['delete', '-f', '-'], { input: rendered.stdout });
      await deleteNamespace(namespace);
    }
  });
});
