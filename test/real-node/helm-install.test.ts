// The user's path, walked on the real node (README "Installing it", docs/operations.md): `helm
// install` with values only runs the operator image as a Deployment in the cluster, where it
// finds the API server through the `kubernetes` Service (in-cluster config, its ServiceAccount
// token), Redis through the bundled Redis's Service name (cluster DNS), and the model endpoint
// and git host on the node's network; the demo run and an approval through the plugin go
// through it; metrics are scraped through the metrics Service; `helm upgrade` to a chart with a
// changed CRD and a new image tag while a run waits loses and repeats nothing; `helm
// uninstall` leaves runs, sandbox pods, policies and the CRD exactly as the README says.
//
// One file, one release, in order: each step is the state the next one starts from, as it is
// for a user. The kube-proxy, API server endpoint and CoreDNS it relies on are
// test/support/real-node/cluster-services.ts; nothing in the operator knows it is a test.
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { createNamespace, deleteNamespace, kubectl, kubectlOk } from '../support/cluster.ts';
import { freePorts } from '../support/control-plane/free-port.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { chartDir, helm } from '../support/helm.ts';
import { applyIn, eventsOf, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { approveAsShown } from '../support/plugin.ts';
import { startNpmRegistryServer, type NpmRegistryServer } from '../support/npm-registry-server.ts';
import { connectFrom, connectThroughProxy, getFrom, until, type SandboxPod } from '../support/real-node/egress-probes.ts';
import { realNodeLabel, realNodeTaint } from '../support/real-node/real-node.ts';
import { runProcess, startProcess, type StartedProcess } from '../support/run-process.ts';
import { SANDBOX_DENY_ALL_POLICY } from '../../operator/src/reconcile/sandbox-network-policy.ts';

const unavailable = inject('realNodeUnavailable') || inject('realNodeInClusterUnavailable');
const RELEASE = 'chamvi';
const NS = 'chamvi-system';
const RUNS = 'helm-runs';
const FULLNAME = `${RELEASE}-chamvi-operator`;
const CRD = 'codingruns.chamvi.dev';
const PROXY = `${FULLNAME}-egress-proxy`;
/** The field the upgraded chart's CRD adds (optional, a string). */
const NEW_FIELD = 'ticket';

interface RunStatus {
  phase?: string;
  reason?: string;
  steps?: number;
  toolCalls?: number;
  completionTime?: string;
  pendingApproval?: { id: string; toolName: string; input: string };
  result?: { diff?: string };
  message?: string;
  egress?: { allowed: number; denied: number; hosts?: { host: string; port: number; allowed: number; denied: number; rule?: string }[] };
}

const placement = {
  nodeSelector: { [realNodeLabel.key]: realNodeLabel.value },
  tolerations: [{ key: realNodeTaint.key, operator: 'Equal', value: realNodeTaint.value, effect: realNodeTaint.effect }],
};

/** repository and tag of an image reference (the tag after the last colon past the last slash). */
function splitRef(ref: string): { repository: string; tag: string } {
  const at = ref.lastIndexOf(':');
  return { repository: ref.slice(0, at), tag: ref.slice(at + 1) };
}

/**
 * Deletes the CRDs and waits until they are gone. The API server's own finalizer
 * (customresourcecleanup) deletes a CRD's instances and then itself; on this node it has been
 * seen (2026-12-01, twice in three runs) to leave a CRD with no instance for over a minute,
 * which made helm refuse to adopt it. Past 15 s, a CRD with no instance left has only that
 * finalizer to hold it, and it is removed; a CRD still there after that fails the setup with
 * what it says of itself.
 */
async function removeCrds(names: readonly string[]): Promise<void> {
  await kubectl(['delete', 'crd', ...names, '--ignore-not-found', '--wait=false'], { timeoutMs: 30_000 });
  const started = Date.now();
  let seen = '';
  try {
    await eventually(
      async () => {
        const left = (await kubectl(['get', 'crd', ...names, '--ignore-not-found', '-o', 'json'])).stdout.trim();
        type Crd = { metadata: { name: string }; spec: { names: { plural: string } }; status?: object };
        const items = left ? ((JSON.parse(left) as { items?: Crd[] }).items ?? []) : [];
        if (items.length === 0) return true;
        seen = JSON.stringify(items.map((crd) => ({ name: crd.metadata.name, status: crd.status })));
        if (Date.now() - started < 15_000) return undefined;
        for (const crd of items) {
          const instances = await kubectl(['get', `${crd.spec.names.plural}.chamvi.dev`, '-A', '-o', 'name']);
          if (instances.code !== 0 || instances.stdout.trim() !== '') continue;
          console.warn(`removing the cleanup finalizer of ${crd.metadata.name}, ${Date.now() - started} ms after its delete: ${seen}`);
          await kubectl(['patch', 'crd', crd.metadata.name, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
        }
        return undefined;
      },
      90_000,
      "the chart's CRDs to be gone",
    );
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}; still there: ${seen}`);
  }
}

describe.skipIf(unavailable !== '')(`helm install on the real node${unavailable ? ` (SKIPPED: ${unavailable})` : ''}`, () => {
  const bridgeIp = inject('realNodeBridgeIp');
  const operatorImage = splitRef(inject('realNodeOperatorImage'));
  const newTag = `${operatorImage.tag}-next`;
  let root = '';
  let valuesFile = '';
  let repoUrl = '';
  let gitDaemon: StartedProcess | undefined;
  let model: FakeOpenAIServer;
  let registry: NpmRegistryServer;
  /** registry.test:<port>: the npm registry's name for the runs, which the proxy alone resolves (to the bridge address). */
  let registryHost = '';
  let appRepoUrl = '';

  const statusOf = (name: string) => runStatus<RunStatus>(RUNS, name);
  const phaseOf = (name: string, wanted: string[], timeoutMs = 120_000) =>
    eventually(
      async () => {
        const status = await statusOf(name);
        return wanted.includes(status.phase ?? '') ? status : undefined;
      },
      timeoutMs,
      `${name} to reach ${wanted.join(' or ')}`,
    );
  /** The operator's pods: name, image, node, ready. */
  const operatorPods = async () =>
    (
      JSON.parse(
        await kubectlOk([
          'get',
          'pods',
          '-n',
          NS,
          '-l',
          `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/component=operator`,
          '-o',
          'json',
        ]),
      ) as {
        items: {
          metadata: { name: string; deletionTimestamp?: string };
          spec: { nodeName?: string; containers: { image: string }[] };
          status: { conditions?: { type: string; status: string }[] };
        }[];
      }
    ).items.map((pod) => ({
      name: pod.metadata.name,
      terminating: !!pod.metadata.deletionTimestamp,
      image: pod.spec.containers[0]!.image,
      node: pod.spec.nodeName,
      ready: pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    }));
  const leader = async () => (await kubectlOk(['get', 'lease', FULLNAME, '-n', NS, '-o', 'jsonpath={.spec.holderIdentity}'])).trim();
  /** "<pod> <message>" of each sandbox pod of the run the scheduler placed (Scheduled events; the pods are gone once a run ends). */
  const scheduled = async (run: string) =>
    (await eventsOf(RUNS, 'reason=Scheduled', 'jsonpath={range .items[*]}{.involvedObject.name} {.message}{"\\n"}{end}'))
      .split('\n')
      .filter((line) => new RegExp(`^${run}-[0-9a-f]{16}-sandbox `).test(line));

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'chamvi-helm-'));
    // The git host and the model endpoint: servers on this machine, reached by the operator
    // pod at the node's bridge address, as a cluster reaches hosts on its nodes' network.
    createBareRepository(root, { 'src/greet.sh': 'echo "Hello"\n', 'README.md': 'Hello\n' });
    // The npm registry the egress runs install from: a real registry on the node's network,
    // which sandboxes reach only through the egress proxy, by a name only the proxy resolves.
    registry = await startNpmRegistryServer(
      [{ name: 'left-pad', version: '1.3.0', files: { 'index.js': "module.exports = (s, n) => String(s).padStart(n, ' ');\n" } }],
      bridgeIp,
    );
    registryHost = `registry.test:${registry.port}`;
    createBareRepository(
      root,
      {
        'README.md': 'An app with one dependency.\n',
        '.gitignore': 'node_modules/\n',
        '.npmrc': `registry=http://${registryHost}/\n`,
        'package.json': JSON.stringify({ name: 'app', version: '1.0.0', dependencies: { 'left-pad': '1.3.0' } }, null, 2),
        'package-lock.json': JSON.stringify(
          {
            name: 'app',
            version: '1.0.0',
            lockfileVersion: 3,
            requires: true,
            packages: {
              '': { name: 'app', version: '1.0.0', dependencies: { 'left-pad': '1.3.0' } },
              'node_modules/left-pad': registry.lockEntry('left-pad', `http://${registryHost}`),
            },
          },
          null,
          2,
        ),
      },
      'app.git',
    );
    const [gitPort] = await freePorts(1);
    gitDaemon = startProcess('git', [
      'daemon',
      '--reuseaddr',
      `--listen=${bridgeIp}`,
      `--port=${gitPort}`,
      `--base-path=${join(root, 'git')}`,
      '--export-all',
      join(root, 'git'),
    ]);
    repoUrl = `git://${bridgeIp}:${gitPort}/hello.git`;
    appRepoUrl = `git://${bridgeIp}:${gitPort}/app.git`;
    await eventually(
      async () => ((await runProcess('git', ['ls-remote', repoUrl], { timeoutMs: 5000 })).code === 0 ? true : undefined),
      15_000,
      'the git daemon',
    );
    model = await startFakeOpenAIServer({ host: bridgeIp });

    // A user's cluster has no CRD before the chart: the control plane's setup applied crds/.
    // Every CRD the chart ships (runs, templates, schedules, evals), else helm refuses to adopt the ones it finds.
    const shipped = readdirSync(new URL('../../crds/', import.meta.url)).map(
      (file) => `${file.replace(/^chamvi\.dev_|\.yaml$/g, '')}.chamvi.dev`,
    );
    await removeCrds(shipped);
    await createNamespace(RUNS, { restricted: true });

    const redisImage = splitRef(inject('realNodeRedisImage'));
    // Values only: what a user of this node writes (README "Installing it").
    valuesFile = join(root, 'values.yaml');
    writeFileSync(
      valuesFile,
      stringify({
        image: { ...operatorImage, pullPolicy: 'IfNotPresent' },
        ...placement,
        resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '1Gi' } },
        redis: {
          bundled: {
            image: { ...redisImage, pullPolicy: 'IfNotPresent' },
            // No storage provisioner on this node: the AOF on an emptyDir.
            persistence: { enabled: false },
            ...placement,
          },
        },
        config: {
          allowRepo: [`git://${bridgeIp}:${gitPort}/*`],
          allowModelEndpoints: [model.baseURL],
          watchNamespaces: [RUNS],
          sandboxImage: inject('realNodeSandboxImage'),
          sandboxPlacement: placement,
          // Every name, on 80 and 443 and on the registry's port: what runs may list.
          allowEgress: ['*', `*:${registry.port}`],
        },
        // docs/egress.md "Running it": the proxy as the chart runs it, its own Deployment and Service.
        egressProxy: {
          enabled: true,
          replicaCount: 1,
          // The registry is on a private address (the bridge): the admin names it, and only it.
          allowPrivateDestinations: [registryHost],
          // No DNS for these names on this node: the proxy resolves them as an admin's aliases
          // say. metadata.test stands for a name resolving to the cloud metadata address,
          // internal.test for an internal service the admin did not open.
          hostAliases: { 'registry.test': bridgeIp, 'metadata.test': '169.254.169.254', 'internal.test': bridgeIp },
          ...placement,
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
        },
      }),
    );
  }, 120_000);

  afterAll(async () => {
    await helm(['uninstall', RELEASE, '-n', NS, '--wait', '--timeout', '2m']);
    // Runs left by a failed step would hold their finalizer without an operator.
    const left = await kubectl(['get', 'crun', '-n', RUNS, '-o', 'name']);
    for (const name of left.stdout.split('\n').filter(Boolean)) {
      await kubectl(['patch', name, '-n', RUNS, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
    }
    await deleteNamespace(RUNS);
    await deleteNamespace(NS);
    // The next test file finds the CRD as the control plane's setup left it.
    await kubectl(['apply', '--server-side', '--force-conflicts', '-f', new URL('../../crds/', import.meta.url).pathname]);
    await model?.stop();
    await registry?.stop();
    gitDaemon?.child.kill();
    if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
  }, 180_000);

  it('helm install with values only: the Deployment is ready (its probes pass), on the real node, and one replica leads', async () => {
    const install = await helm([
      'install',
      RELEASE,
      chartDir,
      '-n',
      NS,
      '--create-namespace',
      '-f',
      valuesFile,
      '--wait',
      '--timeout',
      '4m',
    ]);
    expect(install.stderr).not.toMatch(/Error/);
    expect(install.code).toBe(0);
    expect(install.stdout).toContain('STATUS: deployed');

    const deployment = JSON.parse(await kubectlOk(['get', 'deployment', FULLNAME, '-n', NS, '-o', 'jsonpath={.status}'])) as {
      readyReplicas?: number;
      availableReplicas?: number;
    };
    expect(deployment).toMatchObject({ readyReplicas: 2, availableReplicas: 2 });
    const pods = await operatorPods();
    expect(pods).toHaveLength(2);
    expect(pods.every((pod) => pod.ready && pod.node === inject('realNodeName'))).toBe(true);
    // The readiness probe is /readyz: caches synced on the leader, Redis reachable through its Service.
    const leaderName = await eventually(async () => (await leader()) || undefined, 60_000, 'a leader');
    expect(pods.map((pod) => pod.name)).toContain(leaderName);
    // The chart installed the CRD (templates/crd.yaml), marked to outlive the release.
    expect(await kubectlOk(['get', 'crd', CRD, '-o', 'jsonpath={.metadata.annotations.helm\\.sh/resource-policy}'])).toBe('keep');
  }, 300_000);

  it('runs the demo through the in-cluster operator, with the sandbox on the real node', async () => {
    const demo = readFileSync(new URL('../../examples/demo.yaml', import.meta.url), 'utf8').replace('git://127.0.0.1/hello.git', repoUrl);
    const apply = await kubectl(['apply', '-n', RUNS, '-f', '-'], { input: demo });
    expect(apply.stderr).toBe('');
    const done = await finishedRun<RunStatus>(RUNS, 'demo', 180_000);
    expect(done).toMatchObject({ phase: 'Succeeded', toolCalls: 3 });
    expect(done.result!.diff).toContain('+echo "Hello, ${1:-world}"');
    const sandboxes = await scheduled('demo');
    expect(sandboxes).toHaveLength(1);
    expect(sandboxes[0]).toMatch(new RegExp(`to ${inject('realNodeName')}$`));
  }, 240_000);

  it('serves /metrics through the metrics Service to a scraper pod in the cluster', async () => {
    // As an in-cluster Prometheus would: the Service's DNS name, through kube-proxy; scraped a
    // few times, each on a new connection, so both replicas answer (one of them counted the finished demo).
    const url = `http://${FULLNAME}-metrics.${NS}.svc:8080/metrics`;
    const scraper = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'metrics-scraper', namespace: NS },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        ...placement,
        securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [
          {
            name: 'scrape',
            image: inject('realNodeSandboxImage'),
            imagePullPolicy: 'IfNotPresent',
            command: [
              'node',
              '-e',
              // A new connection for each scrape (no keep-alive): kube-proxy picks a backend per connection.
              `const get=()=>new Promise((ok,fail)=>require('http').get(${JSON.stringify(url)},{agent:false},(r)=>{let b='';r.on('data',(d)=>(b+=d));r.on('end',()=>ok([r.statusCode,b]))}).on('error',fail));` +
                `(async()=>{for(let i=0;i<16;i++){const [status,body]=await get();console.log('### '+status);console.log(body)}})().catch((e)=>{console.log('ERROR '+e.code+' '+e.message);process.exit(1)})`,
            ],
            securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          },
        ],
      },
    };
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(scraper) });
    const phase = await eventually(
      async () => {
        const p = await kubectlOk(['get', 'pod', 'metrics-scraper', '-n', NS, '-o', 'jsonpath={.status.phase}']);
        return p === 'Succeeded' || p === 'Failed' ? p : undefined;
      },
      90_000,
      'the scraper to finish',
    );
    const output = await kubectlOk(['logs', 'metrics-scraper', '-n', NS]);
    expect(phase, output.slice(0, 2000)).toBe('Succeeded');
    expect(output.match(/^### 200$/gm)).toHaveLength(16);
    expect(output).toContain('# TYPE chamvi_runs_finished_total counter');
    expect(output).toMatch(/^chamvi_runs_finished_total\{phase="Succeeded",reason="[^"]*"\} 1$/m);
    expect(output).toMatch(/^chamvi_tool_calls_total\{/m);
    await kubectl(['delete', 'pod', 'metrics-scraper', '-n', NS, '--wait=false']);
  });

  describe("egress through the chart's proxy Deployment, reached by its Service's ClusterIP (docs/egress.md)", () => {
    /** examples/egress.yaml as a user applies it, with this node's repository, registry and a scripted model. */
    const egressRun = (name: string, allow: string[]) => {
      const run = parseYaml(readFileSync(new URL('../../examples/egress.yaml', import.meta.url), 'utf8')) as {
        metadata: { name: string };
        spec: Record<string, unknown> & { sandbox: { setup: string; egress: { allow: string[] } } };
      };
      run.metadata.name = name;
      run.spec.repository = { url: appRepoUrl };
      run.spec.model = { provider: 'scripted', scriptRef: { name: 'installed' } };
      run.spec.sandbox.egress.allow = allow;
      return run;
    };
    const proxyLogs = async () =>
      (await kubectlOk(['logs', '-n', NS, '-l', 'app.kubernetes.io/name=chamvi-egress-proxy', '--tail=-1', '--prefix']))
        .split('\n')
        .filter((line) => line.includes('"event":"egress"'));
    const uidOf = async (name: string) => (await kubectlOk(['get', 'crun', name, '-n', RUNS, '-o', 'jsonpath={.metadata.uid}'])).trim();
    const clusterIp = async () => (await kubectlOk(['get', 'service', PROXY, '-n', NS, '-o', 'jsonpath={.spec.clusterIP}'])).trim();
    const probe: SandboxPod = { namespace: RUNS, name: '' };

    beforeAll(async () => {
      await applyIn(RUNS, [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'installed' },
          data: { 'script.json': JSON.stringify({ turns: [{ text: 'Installed.' }] }) },
        },
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'waits' },
          data: { 'script.json': JSON.stringify({ turns: [{ toolCalls: [{ toolName: 'bash', input: { command: 'npm test' } }] }] }) },
        },
      ]);
    });

    afterAll(async () => {
      // The uninstall step below counts the runs it keeps: these are not among them.
      await kubectl(
        [
          'delete',
          'crun',
          'install-deps',
          'install-denied',
          'install-after-move',
          'probe',
          '-n',
          RUNS,
          '--ignore-not-found',
          '--wait=true',
        ],
        {
          timeoutMs: 120_000,
        },
      );
    }, 150_000);

    it("examples/egress.yaml's `npm ci` installs from the allowed registry through the in-cluster proxy; the proxy audits it into the run's status", async () => {
      await applyIn(RUNS, [egressRun('install-deps', [registryHost])]);
      const done = await finishedRun<RunStatus>(RUNS, 'install-deps', 180_000);
      expect(done, done.message).toMatchObject({ phase: 'Succeeded' });
      expect(registry.requests).toContain('/left-pad/-/left-pad-1.3.0.tgz');
      // Through the proxy pod (its audit line names the run), and its counts reach the status.
      const uid = await uidOf('install-deps');
      expect((await proxyLogs()).some((line) => line.includes(`"runUid":"${uid}"`) && line.includes('"decision":"allowed"'))).toBe(true);
      const counted = await eventually(
        async () => {
          const status = await statusOf('install-deps');
          return (status.egress?.allowed ?? 0) > 0 ? status.egress : undefined;
        },
        30_000,
        'status.egress of install-deps',
      );
      expect(counted!.hosts).toContainEqual(expect.objectContaining({ host: 'registry.test', port: registry.port, denied: 0 }));
    }, 240_000);

    it('a run that does not list the registry ends SetupFailed naming it, and the proxy records an EgressDenied Event', async () => {
      const before = registry.requests.length;
      await applyIn(RUNS, [egressRun('install-denied', [`other.test:${registry.port}`])]);
      const done = await finishedRun<RunStatus>(RUNS, 'install-denied', 180_000);
      expect(done).toMatchObject({ phase: 'Failed', reason: 'SetupFailed' });
      expect(done.message).toContain('registry.test');
      expect(done.message).toContain('403');
      expect(registry.requests.length).toBe(before);
      expect(
        await eventually(
          async () =>
            (await eventsOf(RUNS, 'involvedObject.name=install-denied,reason=EgressDenied', 'jsonpath={.items[*].message}')) || undefined,
          30_000,
          'the EgressDenied Event',
        ),
      ).toContain(registryHost);
    }, 240_000);

    describe('from inside a sandbox allowed every name (`*`), with its own environment and under its own NetworkPolicy', () => {
      beforeAll(async () => {
        // It waits for an approval that never comes: its sandbox stays, with the run's proxy
        // variables and policy, for the probes below.
        const run = egressRun('probe', ['*', `*:${registry.port}`]);
        delete (run.spec.sandbox as { setup?: string }).setup;
        run.spec.model = { provider: 'scripted', scriptRef: { name: 'waits' } };
        run.spec.approval = { tools: ['bash'] };
        await applyIn(RUNS, [run]);
        await phaseOf('probe', ['WaitingForApproval'], 180_000);
        probe.name = (
          await kubectlOk(['get', 'pods', '-n', RUNS, '-l', 'chamvi.dev/run=probe', '-o', 'jsonpath={.items[0].metadata.name}'])
        ).trim();
        const env = await kubectlOk([
          'get',
          'pod',
          probe.name,
          '-n',
          RUNS,
          '-o',
          'jsonpath={.spec.containers[0].env[?(@.name=="HTTPS_PROXY")].value}',
        ]);
        // The proxy's Service ClusterIP, read by the operator from the API server (the chart's Role lets it).
        expect(env).toMatch(new RegExp(`@${(await clusterIp()).replaceAll('.', '\\.')}:3128$`));
      }, 240_000);

      it('reaches the allowed registry through the proxy Service, by the proxy URL and credential of its environment', async () => {
        expect(
          await until(
            () => getFrom(probe, `http://${registryHost}/left-pad`),
            (o) => o.startsWith('200'),
          ),
        ).toMatch(/^200 \{"name":"left-pad"/);
      });

      it('cannot connect around the proxy: not to the registry, the API server, the DNS server, the proxy pod itself on another port', async () => {
        const proxyPod = (
          await kubectlOk([
            'get',
            'pods',
            '-n',
            NS,
            '-l',
            'app.kubernetes.io/name=chamvi-egress-proxy',
            '-o',
            'jsonpath={.items[0].status.podIP}',
          ])
        ).trim();
        expect(await connectFrom(probe, bridgeIp, registry.port)).not.toBe('connected');
        expect(await connectFrom(probe, '10.96.0.1', 443)).not.toBe('connected');
        expect(await connectFrom(probe, bridgeIp, 53)).not.toBe('connected');
        expect(await connectFrom(probe, proxyPod, 9090)).not.toBe('connected');
        // While the proxy port of the same pod answers (the policy, not the network, refused the rest).
        expect(await connectFrom(probe, proxyPod, 3128)).toBe('connected');
      });

      it('is refused an IP address, even the registry’s own or the metadata address (not-a-host-name)', async () => {
        expect(await getFrom(probe, `http://${bridgeIp}:${registry.port}/left-pad`)).toMatch(/^403 .*rule not-a-host-name/);
        expect(await getFrom(probe, 'http://169.254.169.254/latest/meta-data/')).toMatch(/^403 .*rule not-a-host-name/);
        expect(await connectThroughProxy(probe, '169.254.169.254:443')).toBe('403 not-a-host-name');
      });

      it('is refused a name that resolves to the metadata address (forbidden-address) or to a private address the admin did not name (private-address)', async () => {
        expect(await getFrom(probe, 'http://metadata.test/latest/meta-data/')).toMatch(/^403 .*rule forbidden-address/);
        expect(await getFrom(probe, `http://internal.test:${registry.port}/left-pad`)).toMatch(/^403 .*rule private-address/);
      });

      it('is refused the API server by its in-cluster name, which the proxy resolves through the cluster DNS (api-server)', async () => {
        expect(await connectThroughProxy(probe, 'kubernetes.default.svc.cluster.local:443')).toBe('403 api-server');
      });
    });

    it('after the proxy Service is created again with a new ClusterIP (a GitOps prune and re-sync), the next run installs through it', async () => {
      const service = JSON.parse(await kubectlOk(['get', 'service', PROXY, '-n', NS, '-o', 'json'])) as {
        metadata: Record<string, unknown>;
        spec: Record<string, unknown>;
        status?: unknown;
      };
      const before = service.spec.clusterIP as string;
      const { name, namespace, labels, annotations } = service.metadata;
      delete service.spec.clusterIP;
      delete service.spec.clusterIPs;
      await kubectlOk(['delete', 'service', PROXY, '-n', NS, '--wait=true']);
      await kubectlOk(['create', '-f', '-'], {
        input: JSON.stringify({ ...service, metadata: { name, namespace, labels, annotations }, status: undefined }),
      });
      const after = await clusterIp();
      expect(after).not.toBe(before);
      // The old address leads nowhere now: a sandbox given it could not install anything.
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      await applyIn(RUNS, [egressRun('install-after-move', [registryHost])]);
      const done = await finishedRun<RunStatus>(RUNS, 'install-after-move', 180_000);
      expect(done, done.message).toMatchObject({ phase: 'Succeeded' });
      const uid = await uidOf('install-after-move');
      expect((await proxyLogs()).some((line) => line.includes(`"runUid":"${uid}"`) && line.includes('"decision":"allowed"'))).toBe(true);
    }, 240_000);
  });

  it('helm upgrade while a run waits for approval (new CRD field, new image tag): the run goes on once, approved through the plugin; the field is accepted', async () => {
    const command = 'echo approved >> approvals.log';
    model.enqueue(
      { type: 'tool-calls', toolCalls: [{ name: 'bash', arguments: { command } }], usage: { promptTokens: 100, completionTokens: 10 } },
      { type: 'text', text: 'Logged the approval.', usage: { promptTokens: 120, completionTokens: 5 } },
    );
    await applyIn(RUNS, [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'model-key', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { apiKey: 'sk-real-node' },
      },
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'gated' },
        spec: {
          task: 'Log that a human approved.',
          repository: { url: repoUrl },
          model: { provider: 'openai-compatible', name: 'fake', baseURL: model.baseURL, apiKeySecretRef: { name: 'model-key' } },
          approval: { tools: ['bash'] },
          budget: { maxSteps: 5, timeout: '10m' },
        },
      },
    ]);
    const waiting = await phaseOf('gated', ['WaitingForApproval']);
    expect(waiting.pendingApproval).toMatchObject({ toolName: 'bash', input: JSON.stringify({ command }) });
    const sandboxBefore = await scheduled('gated');
    expect(sandboxBefore).toHaveLength(1);
    const demoBefore = await statusOf('demo');

    // Before the upgrade the CRD does not know the field: kubectl's strict validation refuses it.
    const withField = (name: string) => ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name, namespace: RUNS },
      spec: {
        task: 'Say hello.',
        repository: { url: repoUrl },
        model: { provider: 'scripted', scriptRef: { name: 'demo-script' } },
        [NEW_FIELD]: 'OPS-1234',
      },
    });
    const early = await kubectl(['apply', '-f', '-'], { input: JSON.stringify(withField('early')) });
    expect(early.code).not.toBe(0);
    expect(early.stderr).toContain(`unknown field "spec.${NEW_FIELD}"`);

    // The next chart: its CRD has the new optional field, its operator image a new tag (the
    // same build, tagged anew in the node's containerd: the rollout is what is tested).
    const next = join(root, 'chart-next');
    cpSync(chartDir, next, { recursive: true });
    const crdPath = join(next, 'files/crd/chamvi.dev_codingruns.yaml');
    const crd = parseYaml(readFileSync(crdPath, 'utf8')) as {
      spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, object> } } } } }[] };
    };
    crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties[NEW_FIELD] = {
      type: 'string',
      maxLength: 64,
      description: 'The ticket this run is for.',
    };
    writeFileSync(crdPath, stringify(crd));
    const chartYaml = join(next, 'Chart.yaml');
    writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace(/^version: .*$/m, 'version: 0.1.1-next'));
    const tagged = await runProcess(
      'ctr',
      [
        '--address',
        inject('realNodeContainerdSocket'),
        '-n',
        'k8s.io',
        'images',
        'tag',
        '--force',
        `${operatorImage.repository}:${operatorImage.tag}`,
        `${operatorImage.repository}:${newTag}`,
      ],
      { timeoutMs: 30_000 },
    );
    expect(tagged.stderr).toBe('');

    const upgrade = await helm([
      'upgrade',
      RELEASE,
      next,
      '-n',
      NS,
      '-f',
      valuesFile,
      '--set',
      `image.tag=${newTag}`,
      '--wait',
      '--timeout',
      '4m',
    ]);
    expect(upgrade.stderr).not.toMatch(/Error/);
    expect(upgrade.code).toBe(0);
    // The rollout is over: two ready pods, both on the new image, none of the old left.
    await eventually(
      async () => {
        const pods = await operatorPods();
        return pods.length === 2 && pods.every((pod) => pod.ready && !pod.terminating && pod.image.endsWith(`:${newTag}`))
          ? pods
          : undefined;
      },
      120_000,
      'the rollout to the new image',
    );
    const newLeader = await eventually(
      async () => {
        const name = await leader();
        return (await operatorPods()).some((pod) => pod.name === name) ? name : undefined;
      },
      60_000,
      'a leader among the new pods',
    );
    expect(newLeader).toBeTruthy();

    // The waiting run came through: still waiting for the same call, on the same sandbox pod.
    const after = await statusOf('gated');
    expect(after).toMatchObject({ phase: 'WaitingForApproval', toolCalls: 0, pendingApproval: { id: waiting.pendingApproval!.id } });
    const { approved } = await approveAsShown(['gated', '-n', RUNS, '--id', waiting.pendingApproval!.id]);
    expect(approved.stderr).toBe('');
    expect(approved.code).toBe(0);
    const done = await finishedRun<RunStatus>(RUNS, 'gated', 120_000);
    expect(done).toMatchObject({ phase: 'Succeeded', toolCalls: 1 });
    // Once: one line in the file, one sandbox pod, two model calls (the call, then the answer).
    expect(done.result!.diff!.match(/^\+approved$/gm)).toHaveLength(1);
    expect(await scheduled('gated')).toEqual(sandboxBefore);
    expect(model.requests).toHaveLength(2);
    // The finished demo was not run again.
    expect(await statusOf('demo')).toMatchObject({
      phase: 'Succeeded',
      steps: demoBefore.steps,
      completionTime: demoBefore.completionTime,
    });

    // The upgraded CRD takes the field and keeps it.
    const late = await kubectl(['apply', '-f', '-'], { input: JSON.stringify(withField('with-ticket')) });
    expect(late.stderr).toBe('');
    expect(late.code).toBe(0);
    expect(await kubectlOk(['get', 'crun', 'with-ticket', '-n', RUNS, '-o', `jsonpath={.spec.${NEW_FIELD}}`])).toBe('OPS-1234');
    // The operator (which does not know the field) runs it like any other.
    expect(await finishedRun<RunStatus>(RUNS, 'with-ticket', 120_000)).toMatchObject({ phase: 'Succeeded' });
  }, 480_000);

  it('helm uninstall removes the operator and Redis, keeps the CRD, the runs and a waiting run’s sandbox pod and policy (README)', async () => {
    model.enqueue({ type: 'tool-calls', toolCalls: [{ name: 'bash', arguments: { command: 'true' } }] });
    await applyIn(RUNS, [
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'left-waiting' },
        spec: {
          task: 'Wait for a human.',
          repository: { url: repoUrl },
          model: { provider: 'openai-compatible', name: 'fake', baseURL: model.baseURL, apiKeySecretRef: { name: 'model-key' } },
          approval: { tools: ['bash'] },
        },
      },
    ]);
    await phaseOf('left-waiting', ['WaitingForApproval']);
    const owned = async (kind: string) =>
      (await kubectl(['get', kind, '-n', RUNS, '-l', 'chamvi.dev/run=left-waiting', '-o', 'name'])).stdout.trim();
    const denyAll = ['get', 'networkpolicy', SANDBOX_DENY_ALL_POLICY, '-n', RUNS, '-o', 'jsonpath={.metadata.uid}'];
    expect(await owned('pods')).not.toBe('');
    const denyAllUid = await kubectlOk(denyAll);
    expect(denyAllUid).not.toBe('');

    const uninstall = await helm(['uninstall', RELEASE, '-n', NS, '--wait', '--timeout', '2m']);
    expect(uninstall.stderr).not.toMatch(/Error/);
    expect(uninstall.code).toBe(0);
    expect(uninstall.stdout).toContain('These resources were kept due to the resource policy');

    // Gone: the operator, Redis (and with it the queue and every run's working state), their Services, Secrets, RBAC.
    for (const kind of [
      'deployment',
      'statefulset',
      'service',
      'configmap',
      'secret',
      'serviceaccount',
      'role',
      'rolebinding',
      'networkpolicy',
    ]) {
      for (const namespace of [NS, RUNS]) {
        const left = await kubectl(['get', kind, '-n', namespace, '-l', `app.kubernetes.io/instance=${RELEASE}`, '-o', 'name']);
        expect(left.stdout.trim(), `${kind} in ${namespace}`).toBe('');
      }
    }
    await eventually(async () => ((await operatorPods()).length === 0 ? true : undefined), 60_000, 'the operator pods to go');
    // Kept: the CRD (resource policy keep) and every CodingRun, their status as last written.
    expect(await kubectlOk(['get', 'crd', CRD, '-o', 'name'])).toContain(CRD);
    const runs = (await kubectlOk(['get', 'crun', '-n', RUNS, '-o', 'name'])).split('\n').filter(Boolean).sort();
    expect(runs).toEqual([
      'codingrun.chamvi.dev/demo',
      'codingrun.chamvi.dev/gated',
      'codingrun.chamvi.dev/left-waiting',
      'codingrun.chamvi.dev/with-ticket',
    ]);
    expect(await statusOf('demo')).toMatchObject({ phase: 'Succeeded' });
    expect(await statusOf('left-waiting')).toMatchObject({ phase: 'WaitingForApproval' });
    // The operator's Lease and the release namespace are not the chart's: they stay.
    expect(await kubectlOk(['get', 'lease', FULLNAME, '-n', NS, '-o', 'name'])).toContain(FULLNAME);
    // The waiting run's sandbox pod stays with it (owned by the run), and so does the
    // namespace's sandbox deny-all that fences it in (the operator's, not the chart's).
    expect(await owned('pods')).not.toBe('');
    expect(await kubectlOk(denyAll)).toBe(denyAllUid);

    // Deleting a run now waits on its finalizer (no operator to clean up); removing the
    // finalizer deletes it, and the garbage collector its pod.
    await kubectlOk(['delete', 'crun', 'left-waiting', '-n', RUNS, '--wait=false']);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(await kubectlOk(['get', 'crun', 'left-waiting', '-n', RUNS, '-o', 'jsonpath={.metadata.deletionTimestamp}'])).not.toBe('');
    await kubectlOk(['patch', 'crun', 'left-waiting', '-n', RUNS, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
    await eventually(async () => ((await owned('pods')) === '' ? true : undefined), 60_000, "the run's pod to be collected");
  }, 240_000);
});
