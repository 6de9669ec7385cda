// A real node beside the control plane's kwok node (see docs/real-node.md and
// ../../../../shared/design/REAL-NODE.md): Debian's containerd and runc, a kubelet built
// from the control plane's Kubernetes version, the CNI bridge plugins, and kube-router in
// firewall-only mode enforcing NetworkPolicy. Images come from OCI archives imported into
// containerd, never pulled. Everything lives in one short temporary root (unix socket paths
// are limited to 108 bytes) and is stopped and removed by stop().
//
// The node is tainted and labelled (realNodeTaint, realNodeLabel) so only pods that ask for
// it land there; the kwok node stays the default.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { runProcess } from '../run-process.ts';
import { freePorts } from '../control-plane/free-port.ts';
import { logPathOf, startManagedProcess, stopRecordedProcesses, type ManagedProcess } from '../control-plane/managed-process.ts';
import { httpsGet, waitUntil } from '../control-plane/readiness.ts';
import { kubectlOrThrow, runKubectl, type RunKubectlOptions } from '../control-plane/run-kubectl.ts';
import { kubeletClusterDns, podServiceRoutes, startClusterServices } from './cluster-services.ts';

export const realNodeName = 'chamvi-real-node';
export const realNodeLabel = { key: 'chamvi.dev/node', value: 'real' } as const;
export const realNodeTaint = { key: 'chamvi.dev/real-node', value: 'true', effect: 'NoSchedule' } as const;
/** The pods' subnet on the node's bridge: apart from the control plane's kwok and Service ranges. */
export const realNodePodCidr = '10.245.0.0/24';
export const realNodeBridge = 'chamvi-rn0';
/** The bridge's own address: the host as a pod sees it. */
export const realNodeBridgeIp = '10.245.0.1';
/** The bridge's hardware address, set once (createBridge): locally administered, never a port's. */
export const realNodeBridgeMac = '02:63:68:72:6e:01';

const processOrder = ['containerd', 'kubelet', 'kube-router'] as const;
const cniBinDir = '/usr/lib/cni';
/** The pods' CNI network: its config names it, and libcni's cache files start with it. */
const cniNetworkName = 'chamvi-real-node';

/** The node cannot run on this machine; `reason` names the command, version and error. */
export class RealNodeUnavailable extends Error {
  constructor(readonly reason: string) {
    super(`real node unavailable: ${reason}`);
    this.name = 'RealNodeUnavailable';
  }
}

/**
 * One real node per machine: they would share the bridge, the pod range, the node name and
 * the iptables rules. The lock names the running node's root and the process that owns it
 * (0: a dev cluster's, kept until `make dev-cluster-down`).
 */
const lockFile = '/tmp/chamvi-real-node.lock';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The last `count` lines of one of the running node's logs (kube-router, kubelet, containerd)
 * that match `pattern`, for a failure message: the root is gone once the node stops.
 */
export function realNodeLogLines(name: string, pattern: RegExp, count = 20): string[] {
  try {
    const { root } = JSON.parse(readFileSync(lockFile, 'utf8')) as { root: string };
    const lines = readFileSync(logPathOf(root, name), 'utf8').split('\n');
    return lines.filter((line) => pattern.test(line)).slice(-count);
  } catch (error) {
    return [`no ${name} log: ${String(error)}`];
  }
}

async function takeMachineLock(options: RealNodeOptions, log: (m: string) => void): Promise<void> {
  let held: { root: string; owner: number } | undefined;
  try {
    held = JSON.parse(readFileSync(lockFile, 'utf8')) as { root: string; owner: number };
  } catch {
    return;
  }
  let containerdPid = 0;
  try {
    containerdPid = Number(readFileSync(join(held.root, 'pids', 'containerd.pid'), 'utf8').split('\n')[0]) || 0;
  } catch {
    // Its root is gone: nothing of it runs.
  }
  const running = existsSync(held.root) && containerdPid > 0 && pidAlive(containerdPid);
  if (running && (held.owner === 0 || pidAlive(held.owner))) {
    throw new RealNodeUnavailable(
      `another real node runs on this machine (root ${held.root}${held.owner === 0 ? ", the dev cluster's: make dev-cluster-down" : `, owner pid ${held.owner}`}); ` +
        'one at a time: they share the bridge, pod range and iptables',
    );
  }
  // Its owner died without stopping it (a killed test run): clean up after it.
  log(`stopping the orphaned real node in ${held.root}`);
  await stopRealNode(held.root, options, log);
}

export interface RealNodeOptions {
  binDir: string;
  kubeconfig: string;
  /** The control plane's CA: the kubelet authenticates the API server's client cert with it. */
  caCert: string;
  /** Outlives this process (the dev cluster's); otherwise the next start stops it once this process is gone. */
  persistent?: boolean;
  /** OCI or docker archives to import into containerd before the kubelet starts. */
  images: readonly string[];
  /** The archive of the pod sandbox image (pause-image.sh) and the reference inside it. */
  pauseImage: { archive: string; ref: string };
  /** Also run kube-proxy, the `kubernetes` Service's endpoint and CoreDNS (cluster-services.ts): for pods that use Services and names. */
  clusterServices?: boolean;
  log?: (message: string) => void;
}

export interface RealNode {
  nodeName: string;
  root: string;
  containerdSocket: string;
  bridgeIp: string;
  startSeconds: number;
  stop(): Promise<void>;
}

/** Programs and packages the node needs; the message says how to get each. */
export function missingForRealNode(binDir: string): string[] {
  const missing: string[] = [];
  for (const name of ['kubelet', 'kube-router']) {
    if (!existsSync(join(binDir, name))) missing.push(`${join(binDir, name)} (test/support/real-node/build.sh)`);
  }
  for (const command of ['containerd', 'ctr', 'runc', 'iptables', 'ipset']) {
    if (!onPath(command)) missing.push(`${command} (Debian package; test/support/real-node/build.sh packages)`);
  }
  for (const plugin of ['bridge', 'host-local', 'loopback', 'portmap']) {
    if (!existsSync(join(cniBinDir, plugin))) missing.push(`${join(cniBinDir, plugin)} (Debian containernetworking-plugins)`);
  }
  return missing;
}

function onPath(command: string): boolean {
  try {
    execFileSync('bash', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The machine's first non-loopback IPv4 address: the kubelet refuses a loopback node IP. */
export function hostIp(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return address.address;
    }
  }
  throw new RealNodeUnavailable('no non-loopback IPv4 address on this machine (the kubelet needs one as node IP)');
}

export async function startRealNode(options: RealNodeOptions): Promise<RealNode> {
  const began = Date.now();
  const log = options.log ?? (() => {});
  if (process.getuid?.() !== 0) throw new RealNodeUnavailable('containerd and the kubelet need root; this process is not root');
  const missing = missingForRealNode(options.binDir);
  if (missing.length > 0) throw new RealNodeUnavailable(`missing: ${missing.join('; ')}`);
  const nodeIp = hostIp();
  await takeMachineLock(options, log);

  const root = mkdtempSync('/tmp/chamvi-rn-');
  writeFileSync(lockFile, JSON.stringify({ root, owner: options.persistent ? 0 : process.pid }));
  for (const sub of ['logs', 'pids', 'containerd/root', 'containerd/state', 'net.d', 'kubelet', 'cni-state']) {
    mkdirSync(join(root, sub), { recursive: true });
  }
  const socket = join(root, 'containerd.sock');
  const kubectl: RunKubectlOptions = { binDir: options.binDir, kubeconfig: options.kubeconfig };
  const stop = () => stopRealNode(root, options, log);
  try {
    const [kubeletPort, healthzPort, routerHealthPort, routerMetricsPort] = await freePorts(4);
    const start = (name: string, command: string, args: string[]): ManagedProcess => {
      log(`starting ${name}`);
      return startManagedProcess({ name, stateDir: root, command, args });
    };

    await createBridge();
    writeFileSync(join(root, 'containerd.toml'), containerdConfig(root, socket, options.pauseImage.ref));
    writeFileSync(join(root, 'net.d', '10-chamvi.conflist'), cniConfig(root, options.clusterServices ?? false));
    const containerd = start('containerd', 'containerd', ['--config', join(root, 'containerd.toml')]);
    const watched = [containerd];
    await waitUntil('containerd socket', async () => (await ctr(socket, ['version'])).code === 0, {
      timeoutMs: 30_000,
      watch: watched,
    });

    for (const archive of [options.pauseImage.archive, ...options.images]) {
      log(`importing ${archive}`);
      const imported = await ctr(socket, ['-n', 'k8s.io', 'images', 'import', '--all-platforms', archive], 300_000);
      if (imported.code !== 0) throw new Error(`ctr images import ${archive} failed: ${imported.stderr.trim()}`);
    }

    writeFileSync(
      join(root, 'kubelet.yaml'),
      kubeletConfig(root, socket, options.caCert, kubeletPort!, healthzPort!, options.clusterServices ?? false),
    );
    const kubelet = start('kubelet', join(options.binDir, 'kubelet'), [
      `--config=${join(root, 'kubelet.yaml')}`,
      // The admin identity (system:masters): enough for a test node; a real node has its own.
      `--kubeconfig=${options.kubeconfig}`,
      `--hostname-override=${realNodeName}`,
      `--node-ip=${nodeIp}`,
      `--root-dir=${join(root, 'kubelet')}`,
      `--cert-dir=${join(root, 'kubelet', 'pki')}`,
      `--node-labels=${realNodeLabel.key}=${realNodeLabel.value}`,
      '--v=1',
    ]);
    watched.push(kubelet);
    await waitUntil(
      `node ${realNodeName} Ready`,
      async () =>
        (await kubectlOrThrow(['get', 'node', realNodeName, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'], kubectl)) ===
        'True',
      { timeoutMs: 120_000, watch: watched, intervalMs: 500 },
    );
    await waitUntil(`kubelet /healthz on ${healthzPort}`, async () => (await fetch(`http://127.0.0.1:${healthzPort}/healthz`)).ok, {
      timeoutMs: 30_000,
      watch: watched,
    });
    // The API server reaches the kubelet (exec, logs) at the node IP and kubelet port.
    await waitUntil(
      `kubelet API on ${nodeIp}:${kubeletPort}`,
      async () => (await httpsGet(`https://${nodeIp}:${kubeletPort}/healthz`, 'insecure')).status > 0,
      { timeoutMs: 30_000, watch: watched },
    );

    // Test infrastructure only (see docs/real-node.md): firewall-only, no routes, no proxy.
    const router = start('kube-router', join(options.binDir, 'kube-router'), [
      `--kubeconfig=${options.kubeconfig}`,
      `--hostname-override=${realNodeName}`,
      '--run-firewall=true',
      '--run-router=false',
      '--run-service-proxy=false',
      '--enable-cni=false',
      // A full sync that fails (an iptables-restore racing another writer of the filter table,
      // kube-proxy's here) leaves the rules before it until the next event or period; the
      // default period of 5 min would outlast any test's wait for a policy to apply or go.
      '--iptables-sync-period=10s',
      `--health-port=${routerHealthPort}`,
      `--metrics-port=${routerMetricsPort}`,
      '--v=1',
    ]);
    watched.push(router);
    await waitUntil('kube-router /healthz', async () => (await fetch(`http://127.0.0.1:${routerHealthPort}/healthz`)).ok, {
      timeoutMs: 60_000,
      watch: watched,
    });

    if (options.clusterServices) {
      const services = await startClusterServices({
        binDir: options.binDir,
        kubeconfig: options.kubeconfig,
        root,
        nodeName: realNodeName,
        bridge: realNodeBridge,
        bridgeIp: realNodeBridgeIp,
        podCidr: realNodePodCidr,
        log,
      });
      watched.push(...services.processes);
    }

    const startSeconds = Math.round((Date.now() - began) / 100) / 10;
    log(`real node ${realNodeName} up in ${startSeconds}s (root ${root})`);
    writeFileSync(join(root, 'node.json'), JSON.stringify({ nodeName: realNodeName, socket, nodeIp }, null, 2));
    return { nodeName: realNodeName, root, containerdSocket: socket, bridgeIp: realNodeBridgeIp, startSeconds, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * The pods' bridge, made before the first pod with a hardware address of its own. A Linux
 * bridge whose address was never set takes the lowest of its ports' addresses and changes it
 * when that port goes (a pod deleted): every other pod's ARP entry for the gateway then names an
 * address the host no longer answers to, and pod-to-host traffic is dropped until the entry
 * expires, up to about a minute (flannel-io/flannel#1381). The likely cause of the egress test's
 * two clean-clone CI failures: with the policies deleted and kube-router's rules allowing it,
 * the pod's connections to the host (registry and proxy ports alike) still timed out.
 * Debian's bridge plugin (1.1.1) sets no address, and adopts a bridge that exists. Its gateway
 * address is here from the start too: the cluster services listen on it before any pod.
 */
async function createBridge(): Promise<void> {
  const ip = async (args: string[], tolerate?: RegExp) => {
    const result = await runProcess('ip', args, { timeoutMs: 10_000 });
    if (result.code !== 0 && !tolerate?.test(result.stderr)) throw new Error(`ip ${args.join(' ')}: ${result.stderr.trim()}`);
  };
  await ip(['link', 'add', 'name', realNodeBridge, 'type', 'bridge'], /File exists/);
  await ip(['link', 'set', 'dev', realNodeBridge, 'address', realNodeBridgeMac]);
  await ip(
    ['addr', 'add', `${realNodeBridgeIp}/${realNodePodCidr.split('/')[1]}`, 'dev', realNodeBridge],
    /File exists|Address already assigned/,
  );
  await ip(['link', 'set', 'dev', realNodeBridge, 'up']);
}

/**
 * The bridge's hardware address and how the kernel came by it, from sysfs (`assignType` 3:
 * set, never replaced by a port's; 1: random, follows the lowest port's), or undefined when
 * there is no bridge.
 */
export function realNodeBridgeAddress(): { address: string; assignType: string } | undefined {
  const read = (file: string) => readFileSync(`/sys/class/net/${realNodeBridge}/${file}`, 'utf8').trim();
  try {
    return { address: read('address'), assignType: read('addr_assign_type') };
  } catch {
    return undefined;
  }
}

/**
 * Stops everything the node started and removes its root: kube-router (and its iptables
 * rules), the kubelet, every container (containerd's shims outlive containerd), containerd,
 * the pods' network namespaces, the bridge, the mounts under the root, and the Node object.
 */
export async function stopRealNode(
  root: string,
  options: Pick<RealNodeOptions, 'binDir' | 'kubeconfig'>,
  log: (m: string) => void = () => {},
): Promise<void> {
  const socket = join(root, 'containerd.sock');
  await stopRecordedProcesses(root, ['kube-router', 'kubelet']);
  await runProcess(join(options.binDir, 'kube-router'), ['--cleanup-config'], { timeoutMs: 60_000 }).catch(() => undefined);
  if (existsSync(socket)) {
    const tasks = await ctr(socket, ['-n', 'k8s.io', 'tasks', 'list', '-q']);
    for (const id of tasks.stdout.split('\n').filter(Boolean)) {
      await ctr(socket, ['-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', id]);
    }
    for (const id of tasks.stdout.split('\n').filter(Boolean)) {
      await ctr(socket, ['-n', 'k8s.io', 'tasks', 'delete', '-f', id]);
    }
  }
  await stopRecordedProcesses(root, processOrder);
  killShimsOf(root);
  await removePodNetworks();
  await removeKubeIptablesRules();
  unmountUnder(root);
  await runProcess('ip', ['link', 'delete', realNodeBridge], { timeoutMs: 10_000 }).catch(() => undefined);
  await runKubectl(['delete', 'node', realNodeName, '--ignore-not-found', '--wait=false'], {
    binDir: options.binDir,
    kubeconfig: options.kubeconfig,
  }).catch(() => undefined);
  try {
    if ((JSON.parse(readFileSync(lockFile, 'utf8')) as { root: string }).root === root) rmSync(lockFile, { force: true });
  } catch {
    // No lock, or another node's.
  }
  if (!process.env.CHAMVI_KEEP_REAL_NODE_ROOT) rmSync(root, { recursive: true, force: true });
  else log(`real node root kept: ${root}`);
}

/** Where libcni (inside containerd) keeps what each ADD returned, until the DEL. */
const cniCacheDir = '/var/lib/cni/results';

/**
 * The pods' network namespaces: containerd pins each under /run/netns, outside the root, and
 * removes it only when the kubelet stops the pod, which a node stopped with its pods running
 * never does. Each left one veth in the host namespace and one pinned namespace behind, two a
 * test run. libcni's cache names every namespace our network was added to and not yet removed
 * from; deleting the namespace deletes its veth pair. One real node runs per machine (the
 * lock), so every entry of our network is this node's or an earlier, stopped one's.
 */
async function removePodNetworks(): Promise<void> {
  let entries: string[];
  try {
    entries = readdirSync(cniCacheDir).filter((name) => name.startsWith(`${cniNetworkName}-`));
  } catch {
    return; // no cache: no pod was ever added
  }
  for (const entry of entries) {
    const file = join(cniCacheDir, entry);
    let cached: { containerId?: string; result?: { interfaces?: { sandbox?: string }[] } } = {};
    try {
      cached = JSON.parse(readFileSync(file, 'utf8')) as typeof cached;
    } catch {
      // Unreadable: remove it all the same.
    }
    for (const { sandbox } of cached.result?.interfaces ?? []) {
      const name = sandbox?.match(/^\/(?:var\/)?run\/netns\/([\w-]+)$/)?.[1];
      if (name) await runProcess('ip', ['netns', 'delete', name], { timeoutMs: 10_000 }).catch(() => undefined);
    }
    rmSync(file, { force: true });
    // containerd adds the same pod to its built-in loopback network too.
    if (cached.containerId) rmSync(join(cniCacheDir, `cni-loopback-${cached.containerId}-lo`), { force: true });
  }
}

/**
 * containerd's shims outlive containerd by design, and with them each pod's processes: kill
 * every shim started for this root's socket and everything under it (children first).
 */
function killShimsOf(root: string): void {
  const parents = new Map<number, number>();
  const shims: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      parents.set(pid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0]?.endsWith('containerd-shim-runc-v2') && argv.includes(join(root, 'containerd.sock'))) shims.push(pid);
    } catch {
      // Exited meanwhile.
    }
  }
  const under = (ancestor: number): number[] =>
    [...parents].filter(([, parent]) => parent === ancestor).flatMap(([pid]) => [...under(pid), pid]);
  for (const shim of shims) {
    for (const pid of [...under(shim), shim]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  }
}

/**
 * kube-router's --cleanup-config leaves its chains in place (v2.1.0 says it cleaned them, then
 * panics cleaning the proxy it never ran), and the kubelet adds KUBE-FIREWALL and canaries. On
 * this shared machine nothing else uses KUBE- chains: drop every KUBE- chain and every rule
 * jumping to one, table by table, with one save and restore.
 */
async function removeKubeIptablesRules(): Promise<void> {
  for (const [save, restore] of [
    ['iptables-save', 'iptables-restore'],
    ['ip6tables-save', 'ip6tables-restore'],
  ] as const) {
    const dump = await runProcess(save, [], { timeoutMs: 30_000 }).catch(() => undefined);
    if (!dump || dump.code !== 0 || !dump.stdout.includes('KUBE-')) continue;
    const kept = dump.stdout
      .split('\n')
      .filter((line) => !/^:KUBE-|^-A KUBE-| -[jg] KUBE-/.test(line))
      .join('\n');
    await runProcess(restore, [], { input: kept, timeoutMs: 30_000 }).catch(() => undefined);
  }
}

/** Unmounts (deepest first) whatever the kubelet, containerd or CNI left mounted under root. */
function unmountUnder(root: string): void {
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((point): point is string => !!point && (point === root || point.startsWith(`${root}/`)))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) {
    try {
      execFileSync('umount', ['-l', point], { stdio: 'ignore' });
    } catch {
      // Gone already.
    }
  }
}

async function ctr(socket: string, args: string[], timeoutMs = 30_000) {
  const { code, stdout, stderr } = await runProcess('ctr', ['--address', socket, ...args], { timeoutMs });
  return { code: code ?? 1, stdout, stderr };
}

function containerdConfig(root: string, socket: string, pauseRef: string): string {
  return `version = 2
root = "${join(root, 'containerd/root')}"
state = "${join(root, 'containerd/state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${socket}"

[ttrpc]
  address = "${socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "${join(root, 'containerd/opt')}"

[plugins."io.containerd.grpc.v1.cri"]
  # Imported, never pulled (pause-image.sh).
  sandbox_image = "${pauseRef}"
  # These machines cannot lower oom_score_adj; without this every pod sandbox fails with
  # runc's "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${cniBinDir}"
    conf_dir = "${join(root, 'net.d')}"
`;
}

/**
 * A bridge with the pods' subnet and no default route and no masquerade: pods reach the
 * bridge (the host) and each other, nothing beyond this machine.
 */
function cniConfig(root: string, serviceRoutes: boolean): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: cniNetworkName,
      plugins: [
        {
          type: 'bridge',
          bridge: realNodeBridge,
          isGateway: true,
          isDefaultGateway: false,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: realNodePodCidr, gateway: realNodeBridgeIp }]],
            dataDir: join(root, 'cni-state'),
            ...(serviceRoutes ? { routes: podServiceRoutes(realNodeBridgeIp) } : {}),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

function kubeletConfig(root: string, socket: string, caCert: string, port: number, healthzPort: number, clusterDns: boolean): string {
  const config = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    containerRuntimeEndpoint: `unix://${socket}`,
    // These machines have cgroup v1 (hybrid) hierarchies, writable, and no systemd.
    cgroupDriver: 'cgroupfs',
    failCgroupV1: false,
    failSwapOn: false,
    address: '0.0.0.0',
    port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort,
    // The API server presents the control plane's admin client cert on exec and logs;
    // what it may do is asked back through a SubjectAccessReview.
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: caCert } },
    authorization: { mode: 'Webhook' },
    registerWithTaints: [realNodeTaint],
    staticPodPath: '',
    resolvConf: '/etc/resolv.conf',
    // The machine is shared: never evict for disk, never collect the imported images
    // (they cannot be pulled back).
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    maxPods: 50,
    podPidsLimit: 512,
    nodeStatusUpdateFrequency: '5s',
    syncFrequency: '10s',
    fileCheckFrequency: '10s',
    volumeStatsAggPeriod: '0s',
    podLogsDir: join(root, 'pod-logs'),
    // No KUBE-FIREWALL or canary chains of the kubelet's own on a shared machine.
    makeIPTablesUtilChains: false,
    ...(clusterDns ? kubeletClusterDns(realNodeBridgeIp) : {}),
  };
  return JSON.stringify(config, null, 2);
}
