// Starts and stops the local control plane (see ../../../../shared/design/TESTING.md):
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok with one fake Ready
// node, and Redis, all as local processes on free loopback ports with their state, logs
// and pid files in one state directory. cli.ts and global-setup.ts both use this.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { binDir as defaultBinDir, kwokCrdDir, missingBinaries, redisServerPath } from './binaries.ts';
import { createPki, type Pki } from './certificates.ts';
import { freePorts } from './free-port.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import {
  isRecordedProcessRunning,
  recordedProcesses,
  startManagedProcess,
  stopRecordedProcesses,
  type ManagedProcess,
} from './managed-process.ts';
import { httpsGet, redisPing, waitUntil } from './readiness.ts';
import { redisUrlWithPassword, writeRedisAuth } from './redis-auth.ts';
import { kubectlOrThrow, runKubectl, type RunKubectlOptions } from './run-kubectl.ts';

/** Start order; stop runs it backwards so nothing loses its API server mid-flight. */
export const processOrder = ['etcd', 'redis', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok'] as const;

// Services and pods must not share a range: kube-proxy-less as we are, an overlap still
// confuses anything that reasons about IPs (and kwok's default 10.0.0.1/24 has only 254).
const serviceCidr = '10.96.0.0/16';
const serviceIp = '10.96.0.1';
const podCidr = '10.244.0.1/16';
export const kwokNodeName = 'kwok-node-0';
const kwokNodeAnnotation = 'kwok.x-k8s.io/node';

export interface ControlPlaneState {
  stateDir: string;
  binDir: string;
  kubeconfig: string;
  apiServerUrl: string;
  redisUrl: string;
  nodeName: string;
  ports: Record<'etcd' | 'etcdPeer' | 'apiServer' | 'controllerManager' | 'scheduler' | 'kwok' | 'redis', number>;
  startedAt: string;
  startSeconds: number;
}

export interface ControlPlane extends ControlPlaneState {
  stop(): Promise<void>;
}

export interface StartControlPlaneOptions {
  /** Created if missing; must not hold a running control plane. */
  stateDir: string;
  /** Defaults to the cache dir build.sh prints. */
  binDir?: string;
  log?: (message: string) => void;
}

const stateFile = (stateDir: string) => join(stateDir, 'state.json');

export function readControlPlaneState(stateDir: string): ControlPlaneState | undefined {
  try {
    return JSON.parse(readFileSync(stateFile(stateDir), 'utf8')) as ControlPlaneState;
  } catch {
    return undefined;
  }
}

/** True when the state dir describes a control plane whose every process still runs. */
export function isControlPlaneRunning(stateDir: string): boolean {
  const state = readControlPlaneState(stateDir);
  if (!state) return false;
  const recorded = recordedProcesses(stateDir);
  return processOrder.every((name) => recorded.some((entry) => entry.name === name)) && recorded.every(isRecordedProcessRunning);
}

/** Stops every process recorded in the state dir (safe to call twice, or on a half start). */
export async function stopControlPlane(stateDir: string): Promise<void> {
  await stopRecordedProcesses(stateDir, processOrder);
}

export async function startControlPlane(options: StartControlPlaneOptions): Promise<ControlPlane> {
  const began = Date.now();
  const log = options.log ?? (() => {});
  const stateDir = resolve(options.stateDir);
  const bin = options.binDir ?? defaultBinDir();
  const missing = missingBinaries(bin);
  if (missing.length > 0) {
    throw new Error(`missing in ${bin}: ${missing.join(', ')}; run test/support/control-plane/build.sh`);
  }
  if (recordedProcesses(stateDir).some(isRecordedProcessRunning)) {
    throw new Error(`${stateDir} already has running processes; stop them first`);
  }
  for (const sub of ['logs', 'pids', 'etcd', 'redis', 'certs']) mkdirSync(join(stateDir, sub), { recursive: true });

  try {
    const state = await startAll(stateDir, bin, log);
    state.startSeconds = Math.round((Date.now() - began) / 100) / 10;
    writeFileSync(stateFile(stateDir), `${JSON.stringify(state, null, 2)}\n`);
    log(`control plane up in ${state.startSeconds}s`);
    return { ...state, stop: () => stopControlPlane(stateDir) };
  } catch (error) {
    await stopControlPlane(stateDir);
    throw error;
  }
}

async function startAll(stateDir: string, bin: string, log: (message: string) => void): Promise<ControlPlaneState> {
  const portNames = ['etcd', 'etcdPeer', 'apiServer', 'controllerManager', 'scheduler', 'kwok', 'redis'] as const;
  const free = await freePorts(portNames.length);
  const ports = Object.fromEntries(portNames.map((name, i) => [name, free[i]])) as ControlPlaneState['ports'];
  const pki = createPki(join(stateDir, 'pki'), serviceIp);
  const start = (name: string, command: string, args: string[], env?: NodeJS.ProcessEnv) => {
    log(`starting ${name}`);
    return startManagedProcess({ name, stateDir, command, args, ...(env ? { env } : {}) });
  };

  const etcdProc = start('etcd', join(bin, 'etcd'), [
    '--name=default',
    `--data-dir=${join(stateDir, 'etcd')}`,
    `--listen-client-urls=http://127.0.0.1:${ports.etcd}`,
    `--advertise-client-urls=http://127.0.0.1:${ports.etcd}`,
    `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
    `--initial-cluster=default=http://127.0.0.1:${ports.etcdPeer}`,
    '--quota-backend-bytes=8589934592',
    // Throwaway data: skipping fsync makes every write (and so every API request) faster.
    ...(etcdSupports(join(bin, 'etcd'), '--unsafe-no-fsync') ? ['--unsafe-no-fsync'] : []),
  ]);
  // With a password, as the chart's Redis has (redis-auth.ts): tests run the authenticated path.
  const redisAuth = writeRedisAuth(join(stateDir, 'redis'));
  const redisProc = start('redis', redisServerPath(), [
    redisAuth.configFile,
    '--port',
    String(ports.redis),
    '--bind',
    '127.0.0.1',
    // No persistence: tests that need AOF start their own Redis.
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    join(stateDir, 'redis'),
    '--daemonize',
    'no',
  ]);
  await waitUntil('etcd /health', async () => (await fetch(`http://127.0.0.1:${ports.etcd}/health`)).ok, {
    timeoutMs: 60_000,
    watch: [etcdProc],
  });

  const apiServerUrl = `https://127.0.0.1:${ports.apiServer}`;
  const apiProc = start('kube-apiserver', join(bin, 'kube-apiserver'), apiServerArgs(stateDir, pki, ports));
  const watched: ManagedProcess[] = [etcdProc, redisProc, apiProc];
  await waitUntil(
    'kube-apiserver /readyz',
    async () => (await httpsGet(`${apiServerUrl}/readyz`, { ca: pki.caCert, cert: pki.adminCert, key: pki.adminKey })).status === 200,
    { timeoutMs: 180_000, watch: watched, intervalMs: 500 },
  );

  const kubeconfig = join(stateDir, 'kubeconfig');
  writeKubeconfig(kubeconfig, { server: apiServerUrl, caCert: pki.caCert, clientCert: pki.adminCert, clientKey: pki.adminKey });
  const kubectl: RunKubectlOptions = { binDir: bin, kubeconfig };

  const delegated = [`--kubeconfig=${kubeconfig}`, `--authentication-kubeconfig=${kubeconfig}`, `--authorization-kubeconfig=${kubeconfig}`];
  const cmProc = start('kube-controller-manager', join(bin, 'kube-controller-manager'), [
    ...delegated,
    '--bind-address=127.0.0.1',
    `--secure-port=${ports.controllerManager}`,
    `--cert-dir=${join(stateDir, 'certs')}`,
    '--leader-elect=false',
    // The ServiceAccount token controller signs with this key; pods get the root CA.
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--root-ca-file=${pki.caCert}`,
    `--cluster-signing-cert-file=${pki.caCert}`,
    `--cluster-signing-key-file=${pki.caKey}`,
    `--service-cluster-ip-range=${serviceCidr}`,
    '--controllers=*',
    // The node lifecycle controller marks every pod of a node NotReady when the node's
    // heartbeat is late, as kwok's can be on a loaded 2-core machine; kwok never sets them
    // Ready again (a kubelet would), which left sandbox pods Running but unready in tests.
    // It must still run (it lifts the new node's not-ready taint), so give it patience.
    '--node-monitor-grace-period=10m',
  ]);
  const schedulerProc = start('kube-scheduler', join(bin, 'kube-scheduler'), [
    ...delegated,
    '--bind-address=127.0.0.1',
    `--secure-port=${ports.scheduler}`,
    `--cert-dir=${join(stateDir, 'certs')}`,
    '--leader-elect=false',
  ]);
  watched.push(cmProc, schedulerProc);

  // kwok watches Exec/ClusterExec objects in the API server (--enable-crds), so their CRDs
  // must be established before it starts; tests then register one Exec per pod.
  await kubectlOrThrow(['apply', '--server-side', '-f', kwokCrdDir(bin)], kubectl);
  await waitForEstablished(['crd/execs.kwok.x-k8s.io', 'crd/clusterexecs.kwok.x-k8s.io'], kubectl);
  const kwokProc = start(
    'kwok',
    join(bin, 'kwok'),
    [
      `--kubeconfig=${kubeconfig}`,
      '--manage-all-nodes=false',
      `--manage-nodes-with-annotation-selector=${kwokNodeAnnotation}=fake`,
      // The node's InternalIP and daemonEndpoints port: where the API server sends exec.
      '--node-ip=127.0.0.1',
      '--node-name=localhost',
      `--node-port=${ports.kwok}`,
      `--server-address=127.0.0.1:${ports.kwok}`,
      `--tls-cert-file=${pki.kubeletCert}`,
      `--tls-private-key-file=${pki.kubeletKey}`,
      `--cidr=${podCidr}`,
      '--enable-crds=Exec,ClusterExec',
    ],
    kwokEnv(),
  );
  watched.push(kwokProc);
  await kubectlOrThrow(['apply', '-f', '-'], { ...kubectl, input: JSON.stringify(kwokNode()) });

  await waitUntil(
    'kwok kubelet endpoint',
    async () => (await httpsGet(`https://127.0.0.1:${ports.kwok}/healthz`, 'insecure')).status === 200,
    {
      timeoutMs: 60_000,
      watch: watched,
    },
  );
  await waitUntil(
    `node ${kwokNodeName} Ready`,
    async () =>
      (await kubectlOrThrow(['get', 'node', kwokNodeName, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'], kubectl)) ===
      'True',
    { timeoutMs: 60_000, watch: watched, intervalMs: 300 },
  );
  await waitUntil(
    'kube-controller-manager and kube-scheduler /healthz',
    async () =>
      (await httpsGet(`https://127.0.0.1:${ports.controllerManager}/healthz`, 'insecure')).status === 200 &&
      (await httpsGet(`https://127.0.0.1:${ports.scheduler}/healthz`, 'insecure')).status === 200,
    { timeoutMs: 60_000, watch: watched },
  );
  // The ServiceAccount admission plugin refuses pods until the namespace's default
  // ServiceAccount exists, which kube-controller-manager creates shortly after start.
  await waitUntil(
    'default ServiceAccount in namespace default',
    async () => (await kubectlOrThrow(['get', 'serviceaccount', 'default', '-n', 'default', '-o', 'name'], kubectl)).trim() !== '',
    { timeoutMs: 60_000, watch: watched, intervalMs: 300 },
  );
  await waitUntil('redis PING', () => redisPing(ports.redis, redisAuth.password), { timeoutMs: 30_000, watch: watched });

  return {
    stateDir,
    binDir: bin,
    kubeconfig,
    apiServerUrl,
    redisUrl: redisUrlWithPassword(ports.redis, redisAuth.password),
    nodeName: kwokNodeName,
    ports,
    startedAt: new Date().toISOString(),
    startSeconds: 0,
  };
}

function etcdSupports(etcd: string, flag: string): boolean {
  try {
    return execFileSync(etcd, ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).includes(flag);
  } catch (error) {
    // etcd prints its help and exits non-zero on some versions.
    const output = (error as { stdout?: string; stderr?: string }).stdout ?? '';
    return output.includes(flag) || ((error as { stderr?: string }).stderr ?? '').includes(flag);
  }
}

/** Where the API server logs what the e2e tier's operator ServiceAccount did (see auditPolicy). */
export const auditLogFile = (stateDir: string) => join(stateDir, 'audit.log');

/**
 * Metadata only (no bodies), and only for:
 * - ServiceAccounts of the chamvi-rbac namespace, where test/e2e/rbac.test.ts installs the
 *   chart's: the verbs the operator really used, compared with the chart's ClusterRole;
 * - reads of one CodingRun by anyone: the scale benchmark tells the operator's from
 *   kube-controller-manager's garbage collector's by their user agent, which the API server's
 *   request counter does not have (test/bench/api-request-counter.ts).
 * Everything else is not logged, so the log stays small.
 */
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:chamvi-rbac"]
  - level: Metadata
    verbs: ["get"]
    resources: [{ group: "chamvi.dev", resources: ["codingruns"] }]
  - level: None
`;

function apiServerArgs(stateDir: string, pki: Pki, ports: ControlPlaneState['ports']): string[] {
  writeFileSync(join(stateDir, 'audit-policy.yaml'), auditPolicy);
  return [
    `--audit-policy-file=${join(stateDir, 'audit-policy.yaml')}`,
    `--audit-log-path=${auditLogFile(stateDir)}`,
    '--audit-log-format=json',
    '--audit-log-mode=blocking',
    `--etcd-servers=http://127.0.0.1:${ports.etcd}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${ports.apiServer}`,
    `--cert-dir=${join(stateDir, 'certs')}`,
    `--tls-cert-file=${pki.apiServerCert}`,
    `--tls-private-key-file=${pki.apiServerKey}`,
    `--client-ca-file=${pki.caCert}`,
    `--service-account-key-file=${pki.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-cluster-ip-range=${serviceCidr}`,
    '--authorization-mode=Node,RBAC',
    // PodSecurity and ServiceAccount admission are on by default; NodeRestriction pairs
    // with the Node authorizer.
    '--enable-admission-plugins=NodeRestriction',
    // Let PodSecurity be what refuses a privileged pod in a restricted namespace,
    // rather than the older cluster-wide switch.
    '--allow-privileged=true',
    // Exec and logs go to kwok's kubelet endpoint at the node's InternalIP. There is no
    // --kubelet-certificate-authority, so the API server does not verify kwok's cert.
    '--kubelet-preferred-address-types=InternalIP',
    `--kubelet-client-certificate=${pki.adminCert}`,
    `--kubelet-client-key=${pki.adminKey}`,
    // 127.0.0.1 is not a valid Endpoints address, so do not publish the
    // `kubernetes` Service endpoints.
    '--endpoint-reconciler-type=none',
    '--profiling=false',
  ];
}

// Commands exec'd "in a pod" inherit kwok's environment plus their Exec's envs. Keep it
// to what a container would have, so no test credentials (KUBECONFIG, REDIS_URL, keys)
// leak into what the sandbox sees.
function kwokEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin' };
  for (const name of ['HOME', 'LANG', 'TZ']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

function kwokNode(): object {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: kwokNodeName,
      annotations: { [kwokNodeAnnotation]: 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: {
        'kubernetes.io/hostname': kwokNodeName,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'node-role.kubernetes.io/agent': '',
        type: 'kwok',
      },
    },
    // No taint: the operator's sandbox pods carry no kwok toleration and must land here.
    spec: {},
    // kwok keeps a node's own allocatable. Sandbox pods request ephemeral storage, and the
    // scale benchmark puts a thousand of them on this one node: make room for both.
    status: {
      capacity: { cpu: '1k', memory: '4Ti', 'ephemeral-storage': '100Ti', pods: '10k' },
      allocatable: { cpu: '1k', memory: '4Ti', 'ephemeral-storage': '100Ti', pods: '10k' },
    },
  };
}

/**
 * Waits until each CRD is Established. Not `kubectl wait --for=condition=Established`:
 * right after an apply the CRD may have no status.conditions yet, and kubectl then fails
 * at once ("conditions accessor error") instead of waiting.
 */
async function waitForEstablished(crds: readonly string[], kubectl: RunKubectlOptions): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (const crd of crds) {
    for (;;) {
      const result = await runKubectl(['get', crd, '-o', 'jsonpath={.status.conditions[?(@.type=="Established")].status}'], kubectl);
      if (result.code === 0 && result.stdout.trim() === 'True') break;
      if (Date.now() > deadline) throw new Error(`${crd} is not Established after 60s: ${result.stderr.trim() || result.stdout.trim()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * Applies every *.yaml/*.json manifest in `dir` (if it exists and has any) and waits for
 * the CustomResourceDefinitions among them to be Established.
 */
export async function applyManifestDir(plane: Pick<ControlPlaneState, 'binDir' | 'kubeconfig'>, dir: string): Promise<boolean> {
  if (!existsSync(dir)) return false;
  const files = readdirSync(dir).filter((file) => /\.(ya?ml|json)$/.test(file));
  if (files.length === 0) return false;
  const kubectl: RunKubectlOptions = { binDir: plane.binDir, kubeconfig: plane.kubeconfig };
  // Server-side apply: CRDs with big schemas overflow the last-applied annotation.
  const applied = await kubectlOrThrow(['apply', '--server-side', '--force-conflicts', '-f', dir, '-o', 'name'], kubectl);
  const crds = applied.split('\n').filter((name) => name.startsWith('customresourcedefinition'));
  if (crds.length > 0) {
    await waitForEstablished(crds, kubectl);
  }
  return true;
}

/** Removes a stopped control plane's state dir. */
export function removeStateDir(stateDir: string): void {
  rmSync(stateDir, { recursive: true, force: true });
}
