// Scale benchmark (`make bench-scale`, N=200 unless N=... is given): N CodingRuns created at
// once against N Jobs created at once, on one fresh local control plane, one after the other
// so the API server's request counters can be told apart per phase.
//
//   jobs: N Jobs (one pod each, `true`) handled by kube-controller-manager's Job controller;
//         kwok's built-in pod-complete stage moves a Running pod owned by a Job to Succeeded,
//         so the Jobs really complete. Twice by default: first at kube-controller-manager's
//         default client limits (QPS 20, burst 30), then, after restarting it, with limits
//         as good as none, as the operator's client has none (controller-manager-limits.ts).
//   runs: N CodingRuns, a scripted 3-step model (read_file, edit_file, answer) on a one-file
//         repository, handled by the operator as the image runs it (bundled, plain node), with
//         real exec into the kwok pods running the real toolbox.
//
// Both phases create their objects the same way (32 requests in flight) and time the same
// things from the same watches: when each pod's ADDED event arrives, when each object
// finishes, relative to the create call of its object. Process CPU and memory come from
// /proc; API requests from kube-apiserver's apiserver_request_total before and after.
// Writes test/bench/results/scale.json and prints a table.
//
//   npx tsx test/bench/scale-bench.ts [--n 200] [--warmup 3] [--peer-limits both|unlimited|default]
//                                     [--only jobs|runs] [--pods-only] [--keep] [--max-active-runs M]
//
// --max-active-runs (the operator's maxActiveRuns; N plus the warm-up runs unless given) with
// fewer slots than runs queues the rest, as a fleet larger than the cluster's slots does.
// --only and --pods-only (stop a phase once its pods exist) are for investigating; their
// figures go to results/scale.*.tmp, not scale.json.
// CHAMVI_BENCH_OPERATOR_NODE_ARGS (space-separated) go to the operator's node, for a profile:
// --cpu-prof --cpu-prof-dir=DIR, or --heapsnapshot-signal=SIGUSR2 (the snapshot lands in the
// work directory's operator/, which --keep keeps). CHAMVI_BENCH_OPERATOR_ENV (JSON) adds to
// the operator's environment, e.g. {"CHAMVI_WORKERS_ENABLED":"false"}.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BatchV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, Watch, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { API_VERSION, GROUP, KIND, PLURAL, RUN_LABEL, VERSION, type CodingRun } from '../../operator/src/api/index.ts';
import { reuseConnections } from '../../operator/src/kube/connection-reuse.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import {
  applyManifestDir,
  auditLogFile,
  removeStateDir,
  startControlPlane,
  type ControlPlane,
} from '../support/control-plane/control-plane.ts';
import { recordedProcesses } from '../support/control-plane/managed-process.ts';
import { SANDBOX_POD_SELECTOR } from '../support/sandbox-exec-registrar.ts';
import {
  attribute,
  difference,
  garbageCollectorRunReads,
  moveGarbageCollectorReads,
  moveRequests,
  scrapeRequestTotals,
  type RequestCounts,
} from './api-request-counter.ts';
import {
  KCM_DEFAULT_LIMITS,
  KCM_UNLIMITED,
  currentLimits,
  rateLimiterWait,
  restartControllerManager,
  type ClientLimits,
} from './controller-manager-limits.ts';
import { BundledOperator, bundleOperator } from './bundled-operator.ts';
import { latencyFigure, roundTo, type LatencyFigure } from './latency-figures.ts';
import { ProcessSampler, type ProcessUsage } from './process-sampler.ts';
import { goalLines, scaleGoals } from './scale-goals.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const resultsFile = fileURLToPath(new URL('./results/scale.json', import.meta.url));
const KUBERNETES_VERSION = 'v1.34.4';
const CREATES_IN_FLIGHT = 32;
const SETTLE_MS = 3_000;
const JOB_NAME_LABEL = 'batch.kubernetes.io/job-name';
const MiB = 1024 * 1024;

const NAMESPACES = {
  jobs: 'scale-jobs',
  jobsDefault: 'scale-jobs-default',
  runs: 'scale-runs',
  warmup: 'scale-warmup',
  lease: 'scale-lease',
} as const;

// kube-controller-manager's Job controller syncs 5 Jobs at once (--concurrent-job-syncs, its
// default, left as it is); the operator reconciles 4 runs at once and runs 8 agent jobs.
const KCM_CONCURRENT_JOB_SYNCS = 5;

// The scripted model: three steps (model calls), two tool calls, a one-line diff.
const SCRIPT_TURNS = [
  { toolCalls: [{ toolName: 'read_file', input: { path: 'README.md' } }], usage: { inputTokens: 1000, outputTokens: 20 } },
  {
    toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
    usage: { inputTokens: 1100, outputTokens: 30 },
  },
  { text: 'Greeted the world.', usage: { inputTokens: 1200, outputTokens: 10 } },
];

// Which component makes which kind of request (first match wins). The API server's counter
// has no client label; these kinds are each made by one component only in these phases.
const COMMON_RULES: Array<readonly [string, RegExp]> = [
  ['watches', /^(WATCH|LIST) /],
  ['background', /coordination\.k8s\.io\/leases|^\w+ \/nodes/],
  ['kubelet (kwok)', /^\w+ \/pods\/status$|^DELETE \/pods, kwok's/],
  ['scheduler', /^\w+ \/pods\/binding$|^\w+ events\.k8s\.io\/events$/],
];
const JOB_RULES = [['benchmark', /^POST batch\/jobs$/] as const, ...COMMON_RULES];
const GARBAGE_COLLECTOR = 'garbage collector (kube-controller-manager)';
const RUN_RULES = [
  ['benchmark', /^POST chamvi\.dev\/codingruns$/] as const,
  [GARBAGE_COLLECTOR, /the garbage collector's$/] as const,
  ['exec registrar (test harness)', /kwok\.x-k8s\.io\/execs/] as const,
  ...COMMON_RULES,
];

type Outcome = 'succeeded' | 'failed';

interface PhaseSpec {
  label: 'jobs' | 'runs';
  namespace: string;
  names: string[];
  objectPath: string;
  podSelector: string;
  ownerOfPod(pod: V1Pod): string | undefined;
  outcomeOf(object: unknown): { outcome: Outcome; why?: string } | undefined;
  create(name: string): Promise<unknown>;
  /** The runs' pods go when a run ends; the Jobs' pods stay (Succeeded). */
  waitForPodsGone: boolean;
  rules: Array<readonly [string, RegExp]>;
  /** The API server's audit log, where the phase's requests are told apart by client (garbageCollectorRunReads). */
  auditLog?: string;
  samplers: Record<string, ProcessSampler>;
  timeoutMs: number;
  podsOnly: boolean;
  /** The controller's own count of reconciles, where it has one (the operator does). */
  reconciles?: () => Promise<number>;
  /**
   * How long the controller's event loop was held, where it says (the operator's /metrics:
   * prom-client's monitorEventLoopDelay, reset at each scrape): read at the end, it covers the
   * phase since the reconcile count's scrape at its start.
   */
  eventLoopDelay?: () => Promise<EventLoopDelay>;
}

interface EventLoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

interface PhaseResult {
  n: number;
  completed: boolean;
  createWindowMs: number;
  allPodsMs: number | null;
  allDoneMs: number | null;
  podsGoneMs?: number | null;
  podLatencyMs: LatencyFigure;
  doneLatencyMs: LatencyFigure;
  podsSeen: number;
  succeeded: number;
  failed: number;
  failures: string[];
  apiRequests: {
    total: number;
    perObject: number;
    controllerPerObject: number;
    allButHarnessPerObject: number;
    byComponent: ReturnType<typeof attribute>;
  };
  processes: Record<string, ReturnType<typeof usageFigures>>;
  reconcilesPerObject?: number;
  eventLoopDelayMs?: EventLoopDelay;
  /** Jobs phases: kube-controller-manager's client limits, and how long its requests waited on them in the phase. */
  clientLimits?: ClientLimits & { rateLimiterWaitSeconds: number; requestsThroughLimiter: number };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/** A watch that survives the server closing it, resuming from the last resourceVersion. */
async function keepWatching(
  watch: Watch,
  watchPath: string,
  labelSelector: string | undefined,
  onEvent: (type: string, object: { metadata?: { resourceVersion?: string } }) => void,
): Promise<() => void> {
  let stopped = false;
  let abort: AbortController | undefined;
  let resourceVersion: string | undefined;
  const start = async (): Promise<void> => {
    const query: Record<string, string | number | boolean> = { allowWatchBookmarks: false, timeoutSeconds: 3600 };
    if (labelSelector) query.labelSelector = labelSelector;
    if (resourceVersion) query.resourceVersion = resourceVersion;
    abort = await watch.watch(
      watchPath,
      query,
      (type, object: { metadata?: { resourceVersion?: string } }) => {
        if (object.metadata?.resourceVersion) resourceVersion = object.metadata.resourceVersion;
        onEvent(type, object);
      },
      (error) => {
        if (stopped) return;
        if (error) console.error(`watch ${watchPath} ended (${String(error)}); resuming`);
        void sleep(200).then(() => (stopped ? undefined : start()));
      },
    );
  };
  await start();
  return () => {
    stopped = true;
    abort?.abort();
  };
}

// Every sandbox pod runs a real toolbox process on this machine (about 15 MiB each), and the
// machine is shared: stop before it runs out of memory rather than have the kernel pick.
const MIN_AVAILABLE_BYTES = 1.5 * 1024 * MiB;

function availableMemoryBytes(): number {
  const match = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return match ? Number(match[1]) * 1024 : Infinity;
}

async function until(what: string, timeoutMs: number, done: () => boolean, progress?: () => string): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let lastReport = Date.now();
  let lastMemoryCheck = 0;
  while (!done()) {
    if (Date.now() - lastMemoryCheck > 1_000) {
      lastMemoryCheck = Date.now();
      const available = availableMemoryBytes();
      if (available < MIN_AVAILABLE_BYTES) {
        throw new Error(
          `stopping: only ${Math.round(available / MiB)} MiB of memory left on this machine while waiting for ${what}${progress ? ` (${progress()})` : ''}`,
        );
      }
    }
    if (Date.now() > deadline) {
      console.error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}${progress ? ` (${progress()})` : ''}`);
      return false;
    }
    if (progress && Date.now() - lastReport > 15_000) {
      console.log(`  ... ${progress()}`);
      lastReport = Date.now();
    }
    await sleep(50);
  }
  return true;
}

function usageFigures(usage: ProcessUsage) {
  return {
    cpuSeconds: roundTo(usage.cpuSeconds, 2),
    peakRssMiB: roundTo(usage.peakRssBytes / MiB),
    peakRootRssMiB: roundTo(usage.peakRootRssBytes / MiB),
    ...(usage.peakPssBytes !== undefined ? { peakPssMiB: roundTo(usage.peakPssBytes / MiB) } : {}),
  };
}

async function runPhase(spec: PhaseSpec, kubeConfig: KubeConfig): Promise<PhaseResult> {
  const watch = new Watch(kubeConfig);
  const n = spec.names.length;
  const issuedAt = new Map<string, number>();
  const podSeenAt = new Map<string, number>();
  const doneAt = new Map<string, number>();
  const failures: string[] = [];
  let failed = 0;
  let podsGone = 0;
  const wanted = new Set(spec.names);

  const stopPods = await keepWatching(watch, `/api/v1/namespaces/${spec.namespace}/pods`, spec.podSelector, (type, object) => {
    const owner = spec.ownerOfPod(object as V1Pod);
    if (!owner || !wanted.has(owner)) return;
    if (!podSeenAt.has(owner)) podSeenAt.set(owner, now());
    if (type === 'DELETED') podsGone += 1;
  });
  const stopObjects = await keepWatching(watch, spec.objectPath, undefined, (_type, object) => {
    const name = (object as { metadata?: { name?: string } }).metadata?.name ?? '';
    if (!wanted.has(name) || doneAt.has(name)) return;
    const result = spec.outcomeOf(object);
    if (!result) return;
    doneAt.set(name, now());
    if (result.outcome === 'failed') {
      failed += 1;
      if (failures.length < 10) failures.push(`${name}: ${result.why ?? 'failed'}`);
    }
  });

  const before = await scrapeRequestTotals(kubeConfig);
  const auditFrom = spec.auditLog ? statSync(spec.auditLog).size : 0;
  const reconcilesBefore = await spec.reconciles?.();
  for (const sampler of Object.values(spec.samplers)) sampler.start();
  const t0 = now();
  await inParallel(spec.names, CREATES_IN_FLIGHT, async (name) => {
    issuedAt.set(name, now());
    await spec.create(name);
  });
  const createWindowMs = now() - t0;
  const progress = () => `${podSeenAt.size}/${n} pods, ${doneAt.size}/${n} finished (${failed} failed), ${podsGone} pods gone`;
  console.log(`  ${n} ${spec.label} created in ${(createWindowMs / 1000).toFixed(1)} s`);

  const podsOk = await until(`${n} pods`, spec.timeoutMs, () => podSeenAt.size >= n, progress);
  const doneOk =
    podsOk && !spec.podsOnly && (await until(`${n} ${spec.label} to finish`, spec.timeoutMs, () => doneAt.size >= n, progress));
  const goneOk =
    !spec.waitForPodsGone ||
    spec.podsOnly ||
    (doneOk && (await until(`${n} pods to go`, 120_000 + n * 100, () => podsGone >= n, progress)));
  const lastGoneAt = spec.waitForPodsGone && !spec.podsOnly && goneOk ? now() : undefined;
  await sleep(SETTLE_MS);
  const after = await scrapeRequestTotals(kubeConfig);
  // Before the reconcile count: its scrape resets the delay histogram.
  const eventLoopDelayMs = await spec.eventLoopDelay?.();
  const reconcilesAfter = await spec.reconciles?.();
  const usage = Object.fromEntries(Object.entries(spec.samplers).map(([name, sampler]) => [name, usageFigures(sampler.stop())]));
  stopPods();
  stopObjects();

  const gcReads = spec.auditLog ? garbageCollectorRunReads(readFrom(spec.auditLog, auditFrom)) : 0;
  const delta = moveGarbageCollectorReads(adjustPodDeletes(difference(after, before), spec.waitForPodsGone ? podsGone : 0), gcReads);
  const byComponent = attribute(delta, [...spec.rules, ['controller', /./]]);
  const total = [...delta.values()].reduce((sum, count) => sum + count, 0);
  const component = (name: string) => byComponent[name]?.total ?? 0;
  const latest = (times: Map<string, number>) => (times.size >= n ? Math.round(Math.max(...times.values()) - t0) : null);
  const relative = (times: Map<string, number>) => [...times].map(([name, at]) => at - issuedAt.get(name)!);
  return {
    n,
    completed: podsOk && (spec.podsOnly || (doneOk && goneOk)),
    createWindowMs: Math.round(createWindowMs),
    allPodsMs: latest(podSeenAt),
    allDoneMs: latest(doneAt),
    ...(spec.waitForPodsGone ? { podsGoneMs: lastGoneAt !== undefined ? Math.round(lastGoneAt - t0) : null } : {}),
    podLatencyMs: latencyFigure(relative(podSeenAt)),
    doneLatencyMs: latencyFigure(relative(doneAt)),
    podsSeen: podSeenAt.size,
    succeeded: doneAt.size - failed,
    failed,
    failures,
    apiRequests: {
      total,
      perObject: roundTo(total / n, 2),
      controllerPerObject: roundTo(component('controller') / n, 2),
      // Everything the cluster served for these objects except the benchmark's own creates,
      // its watches, the exec registrar and the steady background (leases, node status). The
      // garbage collector's reads of runs count here, not as the operator's (for Jobs they are
      // kube-controller-manager's, the controller's own process, and stay in its row).
      allButHarnessPerObject: roundTo(
        (component('controller') + component('kubelet (kwok)') + component('scheduler') + component(GARBAGE_COLLECTOR)) / n,
        2,
      ),
      byComponent,
    },
    processes: usage,
    ...(reconcilesBefore !== undefined && reconcilesAfter !== undefined
      ? { reconcilesPerObject: roundTo((reconcilesAfter - reconcilesBefore) / n, 2) }
      : {}),
    ...(eventLoopDelayMs ? { eventLoopDelayMs } : {}),
  };
}

/** The text of a file from a byte offset on. */
const readFrom = (file: string, offset: number): string => readFileSync(file).subarray(offset).toString('utf8');

/** The kind kwok's deletes are moved to (adjustPodDeletes), for its row. */
const KWOK_DELETES = "DELETE /pods, kwok's two";

/**
 * A deleted pod costs three DELETEs: the graceful one of whoever deletes it, kwok's final one
 * (grace 0, as a kubelet's), and kwok's repeat of that (kwok v0.7; it mostly finds the pod
 * gone, 404). Seen per client in the API server's audit log. The counter cannot tell them
 * apart, so two per pod that went are moved to kwok's side.
 */
const adjustPodDeletes = (delta: RequestCounts, podsGone: number): RequestCounts =>
  moveRequests(delta, 'DELETE /pods', KWOK_DELETES, 2 * podsGone);

function jobManifest(name: string): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { labels: { app: 'scale-bench' } },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'main',
              image: 'busybox:1.36',
              command: ['true'],
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    },
  };
}

function codingRunManifest(name: string, repositoryUrl: string): object {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name },
    spec: {
      task: 'Make the README greet the whole world.',
      repository: { url: repositoryUrl },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
  };
}

function jobOutcome(object: unknown): { outcome: Outcome; why?: string } | undefined {
  const conditions = (object as V1Job).status?.conditions ?? [];
  if (conditions.some((condition) => condition.type === 'Complete' && condition.status === 'True')) return { outcome: 'succeeded' };
  const failure = conditions.find((condition) => condition.type === 'Failed' && condition.status === 'True');
  return failure ? { outcome: 'failed', why: `${failure.reason}: ${failure.message}` } : undefined;
}

function runOutcome(object: unknown): { outcome: Outcome; why?: string } | undefined {
  const status = (object as CodingRun).status;
  if (status?.phase === 'Succeeded') return { outcome: 'succeeded' };
  if (status?.phase === 'Failed') return { outcome: 'failed', why: `${status.reason}: ${status.message}` };
  return undefined;
}

function makeRepository(work: string): string {
  const source = path.join(work, 'source');
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.email=bench@chamvi.dev', '-c', 'user.name=bench', ...args], { cwd: source, stdio: 'pipe' });
  execFileSync('git', ['init', '-q', '-b', 'main', source]);
  writeFileSync(path.join(source, 'README.md'), 'Hello\n\nA small example repository.\n');
  git('add', '.');
  git('commit', '-qm', 'initial');
  execFileSync('git', ['clone', '-q', '--bare', source, path.join(work, 'git', 'hello.git')]);
  return `file://${path.join(work, 'git', 'hello.git')}`;
}

function startRegistrar(kubeconfig: string, rootDir: string, logFile: string) {
  const log = openSync(logFile, 'a');
  // Its own process, so registering hundreds of pods does not delay this process's watches.
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(repoRoot, 'test/support/sandbox-exec-registrar.ts'), '--kubeconfig', kubeconfig, '--root', rootDir],
    {
      cwd: repoRoot,
      stdio: ['ignore', log, log],
    },
  );
  closeSync(log);
  return child;
}

async function waitForServiceAccount(core: CoreV1Api, namespace: string): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      await core.readNamespacedServiceAccount({ namespace, name: 'default' });
      return;
    } catch (error) {
      if (attempt > 600) throw error;
      await sleep(100);
    }
  }
}

function processPid(plane: ControlPlane, name: string): number {
  const entry = recordedProcesses(plane.stateDir).find((process) => process.name === name);
  if (!entry) throw new Error(`no recorded ${name} process in ${plane.stateDir}`);
  return entry.pid;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      n: { type: 'string' },
      warmup: { type: 'string', default: '3' },
      only: { type: 'string' },
      'pods-only': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      'peer-limits': { type: 'string', default: 'both' },
      'max-active-runs': { type: 'string' },
    },
  });
  const peerLimits = values['peer-limits'];
  if (peerLimits !== 'both' && peerLimits !== 'unlimited' && peerLimits !== 'default')
    throw new Error(`--peer-limits must be both, unlimited or default, got ${peerLimits}`);
  const n = Number(values.n ?? process.env.N ?? 200);
  const warmup = Number(values.warmup);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--n must be a positive integer, got ${values.n ?? process.env.N}`);
  // By default every run gets a slot at once, as every Job gets its pod; fewer queue the rest.
  const maxActiveRuns = values['max-active-runs'] === undefined ? n + warmup : Number(values['max-active-runs']);
  if (!Number.isInteger(maxActiveRuns) || maxActiveRuns < 1)
    throw new Error(`--max-active-runs must be a positive integer, got ${values['max-active-runs']}`);
  const began = Date.now();
  const loadAtStart = loadavg()[0] ?? 0;
  console.log(`scale bench: N=${n} on ${cpus().length} cpus (load ${loadAtStart.toFixed(2)})`);

  const binDir = ensureBinaries();
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-scale-bench-'));
  const stateDir = path.join(work, 'control-plane');
  mkdirSync(stateDir);
  const plane = await startControlPlane({ stateDir, binDir });
  let operator: BundledOperator | undefined;
  let registrar: ReturnType<typeof startRegistrar> | undefined;
  cleanUp = () =>
    (cleaning ??= (async () => {
      await operator?.kill();
      if (registrar && registrar.exitCode === null) {
        registrar.kill('SIGTERM');
        await new Promise((resolve) => registrar!.once('exit', resolve));
      }
      await plane.stop();
      if (values.keep) console.log(`kept ${work}`);
      else {
        removeStateDir(stateDir);
        rmSync(work, { recursive: true, force: true });
      }
    })());
  try {
    await applyManifestDir(plane, path.join(repoRoot, 'crds'));
    console.log(`control plane up in ${plane.startSeconds} s`);
    const kubeConfig = reuseConnections(new KubeConfig());
    kubeConfig.loadFromFile(plane.kubeconfig);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const batch = kubeConfig.makeApiClient(BatchV1Api);
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);

    // The same PodSecurity level for both: the sandbox pod is built for `restricted`.
    const restricted = { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' };
    for (const name of Object.values(NAMESPACES)) {
      await core.createNamespace({ body: { metadata: { name, labels: name === NAMESPACES.lease ? {} : restricted } } });
    }
    for (const name of [NAMESPACES.jobs, NAMESPACES.jobsDefault, NAMESPACES.runs, NAMESPACES.warmup])
      await waitForServiceAccount(core, name);
    const repositoryUrl = makeRepository(work);
    for (const namespace of [NAMESPACES.runs, NAMESPACES.warmup]) {
      await core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name: 'script' }, data: { 'script.json': JSON.stringify({ turns: SCRIPT_TURNS }) } },
      });
    }

    registrar = startRegistrar(plane.kubeconfig, path.join(work, 'workspaces'), path.join(work, 'registrar.log'));
    const bundle = bundleOperator(path.join(work, 'operator'));
    operator = new BundledOperator(
      bundle,
      {
        KUBECONFIG: plane.kubeconfig,
        REDIS_URL: plane.redisUrl,
        CHAMVI_ALLOW_REPO: `file://${path.join(work, 'git')}/*`,
        CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${DEFAULT_TOOLBOX_PATH}`,
        CHAMVI_WATCH_NAMESPACES: `${NAMESPACES.runs},${NAMESPACES.warmup}`,
        CHAMVI_LEADER_ELECTION_NAMESPACE: NAMESPACES.lease,
        CHAMVI_IDENTITY: 'scale-bench',
        CHAMVI_MAX_ACTIVE_RUNS: String(maxActiveRuns),
        CHAMVI_HTTP_PORT: '0',
        // kwok enforces no NetworkPolicy: without the opt-in every run would fail IsolationNotEnforced.
        CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'true',
        LOG_LEVEL: 'info',
        ...(JSON.parse(process.env.CHAMVI_BENCH_OPERATOR_ENV ?? '{}') as Record<string, string>),
      },
      (process.env.CHAMVI_BENCH_OPERATOR_NODE_ARGS ?? '').split(' ').filter(Boolean),
    );
    console.log(`operator pid ${operator.pid}, work directory ${work}`);
    await operator.waitForLog('caches synced; reconciling', 120_000);

    const only = values.only;
    const podsOnly = values['pods-only'];
    // Warm both paths (connections, caches, JIT) so neither phase pays for a cold start.
    console.log(`warm-up: ${warmup} Jobs and ${warmup} CodingRuns`);
    const warmNames = Array.from({ length: warmup }, (_, index) => `warm-${index}`);
    await Promise.all(warmNames.map((name) => batch.createNamespacedJob({ namespace: NAMESPACES.warmup, body: jobManifest(name) })));
    await Promise.all(
      warmNames.map((name) =>
        custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: NAMESPACES.warmup,
          body: codingRunManifest(name, repositoryUrl),
        }),
      ),
    );
    for (const name of warmNames) {
      for (let attempt = 0; ; attempt += 1) {
        const job = await batch.readNamespacedJob({ namespace: NAMESPACES.warmup, name });
        const run = (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: NAMESPACES.warmup,
          name,
        })) as CodingRun;
        // With --pods-only the operator may run without workers: a Running run is warm enough.
        if (jobOutcome(job) && (runOutcome(run) || (podsOnly && run.status?.phase === 'Running'))) {
          if (runOutcome(run)?.outcome === 'failed')
            throw new Error(`warm-up run ${name} failed: ${run.status?.reason}: ${run.status?.message}`);
          break;
        }
        if (attempt > 1800)
          throw new Error(`warm-up ${name} did not finish: job ${JSON.stringify(job.status)}, run ${JSON.stringify(run.status?.phase)}`);
        await sleep(100);
      }
    }
    await sleep(SETTLE_MS);

    const names = Array.from({ length: n }, (_, index) => `bench-${String(index).padStart(4, '0')}`);
    const timeoutMs = 300_000 + n * 1_500;
    const controlPlaneSamplers = () => ({
      'kube-apiserver': new ProcessSampler(processPid(plane, 'kube-apiserver'), { descendants: false }),
      etcd: new ProcessSampler(processPid(plane, 'etcd'), { descendants: false }),
      'kube-scheduler': new ProcessSampler(processPid(plane, 'kube-scheduler'), { descendants: false }),
      // kwok's reaped children are the exec'd commands: in the runs phase, the toolbox.
      kwok: new ProcessSampler(processPid(plane, 'kwok'), { descendants: false }),
      redis: new ProcessSampler(processPid(plane, 'redis'), { descendants: false }),
    });

    if (only !== undefined && only !== 'jobs' && only !== 'runs') throw new Error(`--only must be jobs or runs, got ${only}`);
    const jobsPhase = async (namespace: string): Promise<PhaseResult> => {
      const limits = currentLimits(plane);
      console.log(`jobs phase: ${n} Jobs, kube-controller-manager at client QPS ${limits.qps}, burst ${limits.burst}`);
      const waitedBefore = await rateLimiterWait(plane);
      const result = await runJobsPhase(namespace);
      const waitedAfter = await rateLimiterWait(plane);
      result.clientLimits = {
        ...limits,
        rateLimiterWaitSeconds: roundTo(waitedAfter.seconds - waitedBefore.seconds, 2),
        requestsThroughLimiter: waitedAfter.requests - waitedBefore.requests,
      };
      report(`jobs (QPS ${limits.qps}, burst ${limits.burst})`, result);
      console.log(
        `    kube-controller-manager's requests waited ${result.clientLimits.rateLimiterWaitSeconds} s in all on its client rate limiter (${result.clientLimits.requestsThroughLimiter} requests)`,
      );
      await sleep(SETTLE_MS);
      return result;
    };
    const operatorPid = operator.pid;
    const runJobsPhase = (namespace: string) =>
      runPhase(
        {
          label: 'jobs',
          namespace,
          names,
          objectPath: `/apis/batch/v1/namespaces/${namespace}/jobs`,
          podSelector: JOB_NAME_LABEL,
          ownerOfPod: (pod) => pod.metadata?.labels?.[JOB_NAME_LABEL],
          outcomeOf: jobOutcome,
          create: (name) => batch.createNamespacedJob({ namespace, body: jobManifest(name) }),
          waitForPodsGone: false,
          rules: JOB_RULES,
          samplers: {
            'kube-controller-manager': new ProcessSampler(processPid(plane, 'kube-controller-manager'), { descendants: false }),
            operator: new ProcessSampler(operatorPid),
            ...controlPlaneSamplers(),
          },
          timeoutMs,
          podsOnly,
        },
        kubeConfig,
      );
    // The started kube-controller-manager has its defaults: the default-limit phase first,
    // then the restart without a limit and a fresh warm-up (its informers start again).
    const jobsAtDefaultLimits = only === 'runs' || peerLimits === 'unlimited' ? undefined : await jobsPhase(NAMESPACES.jobsDefault);
    let jobs: PhaseResult | undefined;
    if (only !== 'runs' && peerLimits !== 'default') {
      await restartControllerManager(plane, KCM_UNLIMITED);
      const rewarm = warmNames.map((name) => `${name}-unlimited`);
      await Promise.all(rewarm.map((name) => batch.createNamespacedJob({ namespace: NAMESPACES.warmup, body: jobManifest(name) })));
      for (const name of rewarm) {
        for (let attempt = 0; !jobOutcome(await batch.readNamespacedJob({ namespace: NAMESPACES.warmup, name })); attempt += 1) {
          if (attempt > 1800) throw new Error(`warm-up Job ${name} did not finish after the restart`);
          await sleep(100);
        }
      }
      await sleep(SETTLE_MS);
      jobs = await jobsPhase(NAMESPACES.jobs);
    }

    if (only !== 'jobs') console.log(`runs phase: ${n} CodingRuns`);
    const runs =
      only === 'jobs'
        ? undefined
        : await runPhase(
            {
              label: 'runs',
              namespace: NAMESPACES.runs,
              names,
              objectPath: `/apis/${GROUP}/${VERSION}/namespaces/${NAMESPACES.runs}/${PLURAL}`,
              podSelector: SANDBOX_POD_SELECTOR,
              ownerOfPod: (pod) => pod.metadata?.labels?.[RUN_LABEL],
              outcomeOf: runOutcome,
              create: (name) =>
                custom.createNamespacedCustomObject({
                  group: GROUP,
                  version: VERSION,
                  plural: PLURAL,
                  namespace: NAMESPACES.runs,
                  body: codingRunManifest(name, repositoryUrl),
                }),
              waitForPodsGone: true,
              auditLog: auditLogFile(plane.stateDir),
              reconciles: () => operator!.metric('chamvi_reconcile_duration_seconds_count'),
              eventLoopDelay: async () => {
                const lag = await operator!.metrics(
                  ['p50', 'p99', 'max'].map((each) => `chamvi_operator_nodejs_eventloop_lag_${each}_seconds`),
                );
                const ms = (each: string) => roundTo(1000 * (lag[`chamvi_operator_nodejs_eventloop_lag_${each}_seconds`] ?? Number.NaN), 1);
                return { p50Ms: ms('p50'), p99Ms: ms('p99'), maxMs: ms('max') };
              },
              rules: RUN_RULES,
              samplers: {
                operator: new ProcessSampler(operator.pid, { pss: true }),
                'kube-controller-manager': new ProcessSampler(processPid(plane, 'kube-controller-manager'), { descendants: false }),
                ...controlPlaneSamplers(),
              },
              timeoutMs,
              podsOnly,
            },
            kubeConfig,
          );
    if (runs) report('runs', runs);

    const operatorProblems = operator.problems.slice(-10);
    const results = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      memoryGiB: roundTo(totalmem() / 1024 ** 3),
      loadAverage1m: { atStart: roundTo(loadAtStart, 2), atEnd: roundTo(loadavg()[0] ?? 0, 2) },
      n,
      warmup,
      wallSeconds: Math.round((Date.now() - began) / 1000),
      setup: {
        kubernetes: KUBERNETES_VERSION,
        kubeControllerManager: {
          concurrentJobSyncs: KCM_CONCURRENT_JOB_SYNCS,
          clientLimits: {
            ...(jobs ? { jobs: jobs.clientLimits } : {}),
            ...(jobsAtDefaultLimits ? { jobsAtDefaultLimits: jobsAtDefaultLimits.clientLimits } : {}),
          },
          defaults: { kubeApiQps: KCM_DEFAULT_LIMITS.qps, kubeApiBurst: KCM_DEFAULT_LIMITS.burst },
        },
        operator: {
          clientLimits: 'none: @kubernetes/client-node has no client-side rate limiter and the operator adds none',
          build: 'esbuild bundle of operator/src/main.ts on plain node, as in operator/Dockerfile',
          maxActiveRuns,
          workerConcurrency: 'default (8)',
          reconcileConcurrency: 'default (4)',
        },
        createsInFlight: CREATES_IN_FLIGHT,
        model: `scripted, ${SCRIPT_TURNS.length} steps (read_file, edit_file, answer)`,
        timing:
          "from the create call of each object to the arrival of its pod's ADDED event / its finished status at a watch in the benchmark process",
      },
      jobs,
      jobsAtDefaultLimits,
      runs,
      operatorLog: { warningsAndErrors: operator.problems.length, messages: Object.fromEntries(operator.counts), last: operatorProblems },
      // Judged only when both the runs and a Job phase ran.
      ...(runs && (jobs || jobsAtDefaultLimits)
        ? { goals: scaleGoals(n, runs, runs.processes.operator?.peakRootRssMiB, { unlimited: jobs, atDefaults: jobsAtDefaultLimits }) }
        : {}),
    };
    // A one-phase run is for investigating; it does not replace the committed figures.
    const file = only || podsOnly ? resultsFile.replace(/\.json$/, `.${only ?? 'both'}${podsOnly ? '.pods' : ''}.tmp`) : resultsFile;
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
    printTable(n, runs, jobs, jobsAtDefaultLimits);
    if (results.goals) for (const line of goalLines(results.goals)) console.log(line);
    console.log(`written to ${path.relative(process.cwd(), file)} in ${results.wallSeconds} s`);
    const phases = [jobs, jobsAtDefaultLimits, runs];
    if (phases.some((phase) => phase?.completed === false || (phase?.failed ?? 0) > 0)) process.exitCode = 1;
  } finally {
    await cleanUp();
  }
}

let cleanUp: () => Promise<void> = async () => {};
let cleaning: Promise<void> | undefined;

// Interrupted (Ctrl-C, a timeout), the control plane's detached processes would outlive us.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`${signal}: stopping the operator and the control plane`);
    void cleanUp().finally(() => process.exit(130));
  });
}

function report(label: string, result: PhaseResult): void {
  const seconds = (ms: number | null | undefined) => (ms === null || ms === undefined ? 'n/a' : `${(ms / 1000).toFixed(1)} s`);
  console.log(
    `  ${label}: all pods ${seconds(result.allPodsMs)}, all finished ${seconds(result.allDoneMs)}` +
      `${result.podsGoneMs !== undefined ? `, pods gone ${seconds(result.podsGoneMs)}` : ''}; ` +
      `${result.succeeded} succeeded, ${result.failed} failed; ${result.apiRequests.perObject} requests per object`,
  );
  for (const failure of result.failures) console.log(`    ${failure}`);
}

function printTable(
  n: number,
  runs: PhaseResult | undefined,
  jobs: PhaseResult | undefined,
  jobsAtDefaultLimits: PhaseResult | undefined,
): void {
  const seconds = (ms: number | null | undefined) => (ms === null || ms === undefined ? 'n/a' : (ms / 1000).toFixed(1));
  const ms = (figure: LatencyFigure | undefined) => (figure ? `${Math.round(figure.p50)} / ${Math.round(figure.p99)}` : 'n/a');
  const cpu = (result: PhaseResult | undefined, ...names: string[]) =>
    result ? names.reduce((sum, name) => sum + (result.processes[name]?.cpuSeconds ?? 0), 0).toFixed(1) : 'n/a';
  const text = (value: number | string | undefined) => (value === undefined ? 'n/a' : String(value));
  const limits = (result: PhaseResult | undefined) =>
    result?.clientLimits ? `QPS ${result.clientLimits.qps}, burst ${result.clientLimits.burst}` : 'n/a';
  const peers = [jobs, jobsAtDefaultLimits].filter((peer): peer is PhaseResult => peer !== undefined);
  const row = (figure: string, run: string, peer: (result: PhaseResult) => string) => [figure, run, ...peers.map(peer)];
  const rows = [
    row('figure', `${n} CodingRuns (operator)`, (peer) => `${n} Jobs (Job controller, ${limits(peer)})`),
    row('client rate limit', 'none', (peer) => limits(peer)),
    row('time waited on the client rate limiter, s', '0', (peer) => text(peer.clientLimits?.rateLimiterWaitSeconds)),
    row('all pods exist, s', seconds(runs?.allPodsMs), (peer) => seconds(peer.allPodsMs)),
    row('create-to-pod p50 / p99, ms', ms(runs?.podLatencyMs), (peer) => ms(peer.podLatencyMs)),
    row('all finished, s', seconds(runs?.allDoneMs), (peer) => seconds(peer.allDoneMs)),
    row('create-to-finished p50 / p99, ms', ms(runs?.doneLatencyMs), (peer) => ms(peer.doneLatencyMs)),
    row('succeeded / failed', runs ? `${runs.succeeded} / ${runs.failed}` : 'n/a', (peer) => `${peer.succeeded} / ${peer.failed}`),
    row('controller peak RSS (with children), MiB', text(runs?.processes.operator?.peakRssMiB), (peer) =>
      text(peer.processes['kube-controller-manager']?.peakRssMiB),
    ),
    row(
      '  operator process alone / PSS with children',
      runs ? `${runs.processes.operator?.peakRootRssMiB} / ${runs.processes.operator?.peakPssMiB}` : 'n/a',
      () => '',
    ),
    row('controller CPU, s', cpu(runs, 'operator'), (peer) => cpu(peer, 'kube-controller-manager')),
    row(
      '  operator event loop held, p50 / p99 / max, ms',
      runs?.eventLoopDelayMs ? `${runs.eventLoopDelayMs.p50Ms} / ${runs.eventLoopDelayMs.p99Ms} / ${runs.eventLoopDelayMs.maxMs}` : 'n/a',
      () => '',
    ),
    row('kube-apiserver + etcd CPU, s', cpu(runs, 'kube-apiserver', 'etcd'), (peer) => cpu(peer, 'kube-apiserver', 'etcd')),
    row('API requests per object, controller', text(runs?.apiRequests.controllerPerObject), (peer) =>
      text(peer.apiRequests.controllerPerObject),
    ),
    row('API requests per object, + scheduler, kubelet, GC', text(runs?.apiRequests.allButHarnessPerObject), (peer) =>
      text(peer.apiRequests.allButHarnessPerObject),
    ),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((cells) => cells[column]!.length)));
  for (const cells of rows) console.log(cells.map((cell, column) => cell.padEnd(widths[column]!)).join('  '));
}

await main();
