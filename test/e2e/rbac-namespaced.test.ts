// Security #11.9: with config.watchNamespaces set, the chart grants the operator its rights
// through Roles in the watched namespaces only. Through the real API server: the chart's
// ServiceAccount cannot read a Secret (nor exec into a pod, nor list ConfigMaps) in a
// namespace it does not watch, and the operator with a real token of that ServiceAccount
// still runs a CodingRun end to end in the namespace it watches.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse, stringify } from 'yaml';
import { controlPlaneBin, createNamespace, kubeconfigPath, kubectl, kubectlOk, redisUrl } from '../support/cluster.ts';
import { runKubectl } from '../support/control-plane/run-kubectl.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { templateKubeVersion } from '../support/helm.ts';

const RELEASE = 'nsrbac';
const RELEASE_NS = 'chamvi-nsrbac';
const WATCHED = 'e2e-nsrbac-watched';
const UNWATCHED = 'e2e-nsrbac-other';
const NAME = `${RELEASE}-chamvi-operator`;
const SERVICE_ACCOUNT = `system:serviceaccount:${RELEASE_NS}:${NAME}`;
const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;
const chart = new URL('../../charts/chamvi-operator', import.meta.url).pathname;

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
}

let root: string;
let operatorKubeconfig: string;
let registrar: SandboxExecRegistrar;

/** kubectl that throws with its stderr when it fails. */
const ok = (args: string[], input?: string) => kubectlOk(args, input === undefined ? {} : { input });

function helmTemplate(...args: string[]): string {
  return execFileSync(join(controlPlaneBin(), 'helm'), ['template', RELEASE, chart, '-n', RELEASE_NS, ...templateKubeVersion(), ...args], {
    encoding: 'utf8',
    env: { ...process.env, HELM_CACHE_HOME: '/tmp/chamvi-helm-cache', HELM_CONFIG_HOME: '/tmp/chamvi-helm-config' },
  });
}

const manifests = (text: string): Manifest[] =>
  parseAllDocuments(text)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);

const renderRbac = (...set: string[]) =>
  helmTemplate(
    '--show-only',
    'templates/serviceaccount.yaml',
    '--show-only',
    'templates/rbac.yaml',
    ...set.flatMap((value) => ['--set', value]),
  );

const can = async (...args: string[]) => (await kubectl(['auth', 'can-i', '--as', SERVICE_ACCOUNT, ...args])).stdout.trim();

const PROXY = `${NAME}-egress-proxy`;
const PROXY_ACCOUNT = `system:serviceaccount:${RELEASE_NS}:${PROXY}`;
const RBAC_KINDS = new Set(['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']);
/** The egress proxy's ServiceAccount and RBAC as the chart renders them (not its Deployment). */
const renderProxyRbac = (...set: string[]) =>
  manifests(
    helmTemplate(
      '--show-only',
      'templates/egress-proxy.yaml',
      '--set',
      'egressProxy.enabled=true',
      '--set',
      'config.allowEgress={registry.npmjs.org}',
      ...set.flatMap((value) => ['--set', value]),
    ),
  ).filter((doc) => RBAC_KINDS.has(doc.kind) && doc.metadata.name === PROXY);

describe('security #11.9 the chart renders namespaced RBAC when watchNamespaces is set', () => {
  it('grants every operator right through a Role in each watched namespace, and nothing at cluster scope', () => {
    const docs = manifests(renderRbac(`config.watchNamespaces={${WATCHED},team-b}`));
    expect(docs.filter((doc) => doc.kind === 'ClusterRole' || doc.kind === 'ClusterRoleBinding')).toEqual([]);
    const roles = docs.filter((doc) => doc.kind === 'Role' && doc.metadata.name === NAME);
    expect(roles.map((role) => role.metadata.namespace).sort()).toEqual([WATCHED, 'team-b']);
    const bindings = docs.filter((doc) => doc.kind === 'RoleBinding' && doc.metadata.name === NAME);
    expect(bindings.map((binding) => binding.metadata.namespace).sort()).toEqual([WATCHED, 'team-b']);
    for (const resource of ['secrets', 'pods', 'pods/exec', 'configmaps', 'codingruns']) {
      expect(roles[0]!.rules!.some((rule) => rule.resources.includes(resource))).toBe(true);
    }
    // Only the lease Role lives in the release namespace.
    expect(
      docs
        .filter((doc) => doc.metadata.namespace === RELEASE_NS)
        .map((doc) => `${doc.kind}/${doc.metadata.name}`)
        .sort(),
    ).toEqual([`Role/${NAME}-leader-election`, `RoleBinding/${NAME}-leader-election`, `ServiceAccount/${NAME}`]);
  });

  it('keeps the ClusterRole only in cluster-wide mode (watchNamespaces empty)', () => {
    const docs = manifests(renderRbac());
    const clusterRole = docs.find((doc) => doc.kind === 'ClusterRole')!;
    expect(clusterRole.rules!.some((rule) => rule.resources.includes('secrets'))).toBe(true);
    expect(docs.some((doc) => doc.kind === 'Role' && doc.metadata.name === NAME)).toBe(false);
  });

  it('grants the egress proxy its rights the same way: Roles in the watched namespaces, a ClusterRole only when they are all', () => {
    const namespaced = renderProxyRbac(`config.watchNamespaces={${WATCHED},team-b}`);
    expect(namespaced.map((doc) => `${doc.kind}/${doc.metadata.namespace}`).sort()).toEqual([
      `Role/${WATCHED}`,
      'Role/team-b',
      `RoleBinding/${WATCHED}`,
      'RoleBinding/team-b',
      `ServiceAccount/${RELEASE_NS}`,
    ]);
    const clusterWide = renderProxyRbac();
    expect(clusterWide.map((doc) => doc.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'ServiceAccount']);
  });
});

describe('security #11.9 the ServiceAccount reaches only its watched namespace', () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'chamvi-nsrbac-'));
    writeFileSync(join(root, 'operator-config.yaml'), stringify({ leaderElection: { leaseName: NAME } }));
    await createNamespace(RELEASE_NS);
    await createNamespace(WATCHED, { restricted: true });
    await createNamespace(UNWATCHED);
    await ok(['apply', '-f', '-'], renderRbac(`config.watchNamespaces={${WATCHED}}`));
    await ok(
      ['apply', '-f', '-'],
      renderProxyRbac(`config.watchNamespaces={${WATCHED}}`)
        .map((doc) => stringify(doc))
        .join('---\n'),
    );
    // What an attacker who controls the operator (or its token) would want from elsewhere.
    await ok(['create', 'secret', 'generic', 'db-password', '-n', UNWATCHED, '--from-literal=password=hunter2-planted']);
    const token = (await ok(['create', 'token', NAME, '-n', RELEASE_NS, '--duration=1h'])).trim();
    // A real token of the ServiceAccount, not impersonation: client-node's exec WebSocket
    // does not send Impersonate-User (see rbac.test.ts).
    const config = parse(readFileSync(kubeconfigPath(), 'utf8'));
    for (const user of config.users) user.user = { token };
    operatorKubeconfig = join(root, 'operator-kubeconfig');
    writeFileSync(operatorKubeconfig, stringify(config));
  }, 120_000);

  afterAll(async () => {
    await registrar?.stop();
    if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
  });

  it('cannot read a Secret, exec into a pod or list ConfigMaps in a namespace it does not watch', async () => {
    expect(await can('get', 'secrets', '-n', UNWATCHED)).toBe('no');
    expect(await can('create', 'pods', '--subresource=exec', '-n', UNWATCHED)).toBe('no');
    expect(await can('list', 'configmaps', '-n', UNWATCHED)).toBe('no');
    expect(await can('list', 'pods', '--all-namespaces')).toBe('no');
    expect(await can('get', 'secrets', '-n', WATCHED)).toBe('yes');
    // A real GET with the ServiceAccount's own token (a kubeconfig holding only it), as the operator would make it.
    const read = await runKubectl(['get', 'secret', 'db-password', '-n', UNWATCHED, '-o', 'jsonpath={.data.password}'], {
      binDir: controlPlaneBin(),
      kubeconfig: operatorKubeconfig,
    });
    expect(read.stdout).toBe('');
    expect(read.stderr).toContain('secrets "db-password" is forbidden');
  });

  it("lets the egress proxy's ServiceAccount read and count runs only in the watched namespace", async () => {
    const proxyCan = async (...args: string[]) => (await kubectl(['auth', 'can-i', '--as', PROXY_ACCOUNT, ...args])).stdout.trim();
    expect(await proxyCan('watch', 'codingruns.chamvi.dev', '-n', WATCHED)).toBe('yes');
    expect(await proxyCan('patch', 'codingruns.chamvi.dev', '--subresource=status', '-n', WATCHED)).toBe('yes');
    expect(await proxyCan('create', 'events', '-n', WATCHED)).toBe('yes');
    expect(await proxyCan('list', 'codingruns.chamvi.dev', '-n', UNWATCHED)).toBe('no');
    expect(await proxyCan('list', 'codingruns.chamvi.dev', '--all-namespaces')).toBe('no');
    expect(await proxyCan('create', 'events', '-n', UNWATCHED)).toBe('no');
  });

  it('still lets the operator, as that ServiceAccount watching one namespace, run a CodingRun end to end there', async () => {
    createBareRepository(root);
    const script = {
      turns: [
        { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }] },
        { text: 'done' },
      ],
    };
    await ok(
      ['apply', '-n', WATCHED, '-f', '-'],
      stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'script' }, data: { 'script.json': JSON.stringify(script) } }),
    );
    registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(root, 'workspaces') });

    const operator = new OperatorProcess({
      kubeconfig: operatorKubeconfig,
      env: {
        REDIS_URL: redisUrl(),
        CHAMVI_REDIS_PREFIX: `nsrbac${Date.now()}`,
        CHAMVI_ALLOW_REPO: `file://${join(root, 'git')}/*`,
        CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
        CHAMVI_WATCH_NAMESPACES: WATCHED,
        CHAMVI_LEADER_ELECTION_NAMESPACE: RELEASE_NS,
        // The lease the chart's ConfigMap names, the one its Role grants by name.
        CHAMVI_CONFIG: join(root, 'operator-config.yaml'),
        CHAMVI_IDENTITY: 'nsrbac-operator',
      },
    });
    try {
      await operator.waitForLog('caches synced; reconciling', 60_000);
      const run = {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'namespaced', namespace: WATCHED },
        spec: {
          task: 'Greet the world.',
          repository: { url: `file://${join(root, 'git', 'hello.git')}` },
          model: { provider: 'scripted', scriptRef: { name: 'script' } },
        },
      };
      await ok(['apply', '-f', '-'], stringify(run));
      const status = await eventually(
        async () => {
          const current = JSON.parse((await ok(['get', 'crun', 'namespaced', '-n', WATCHED, '-o', 'jsonpath={.status}'])) || '{}');
          return current.phase === 'Succeeded' || current.phase === 'Failed' ? current : undefined;
        },
        90_000,
        'the run to finish',
      );
      expect(status).toMatchObject({ phase: 'Succeeded' });
      expect(status.result.diff).toContain('+Hello, world');
      // Nothing it did was refused: no forbidden list or watch anywhere.
      expect(operator.lines.filter((line) => /forbidden/i.test(JSON.stringify(line)))).toEqual([]);
    } finally {
      await operator.kill('SIGKILL');
    }
  }, 150_000);
});
