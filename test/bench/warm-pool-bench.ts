// Warm sandboxes: create → first tool call of a run, with a warm pool and without, in the
// same bench run on the same throwaway control plane (kwok pods running the real toolbox).
// Each run is created with one API request, timed just before it is sent; its first tool
// call's end comes from its own status.timings (FirstToolCall, the operator's clock: the same
// machine). Runs go one after another (the next once the last succeeded), so each measures
// one run's path, not a queue; the pool refills in the background between them.
//
// With --real-node the sandboxes (fresh and pooled) are the built sandbox image on the real node
// (warm-pool-targets.ts), written to warm-pool-real-node.json; when that node cannot start here
// the file says why and the bench exits 0, as real-node-bench.ts does.
//
// --files N (--file-bytes B) gives the runs' repository N more files of B random bytes, where
// a clone costs what it costs users (the clone cache's third mode shows it).
//
//   npx tsx test/bench/warm-pool-bench.ts [--runs 30] [--pool 3] [--real-node] [--files 0 --file-bytes 8192]
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { WARM_POOL_LABEL } from '../../operator/src/reconcile/warm-pool.ts';
import { applyManifestDir } from '../support/control-plane/control-plane.ts';
import { kubectlOrThrow, runKubectl } from '../support/control-plane/run-kubectl.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { RealNodeUnavailable } from '../support/real-node/real-node.ts';
import { latencyFigure, type LatencyFigure } from './latency-figures.ts';
import { kwokTarget, realNodeTarget, type WarmPoolTarget } from './warm-pool-targets.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const NS = 'bench';

interface Mode {
  createToFirstToolCallMs: LatencyFigure;
  /** Runs whose sandbox was a claimed pool pod (status.timings SandboxClaimed). */
  claimed: number;
  /** The same figure over those runs alone: a run the pool had no ready pod for took a fresh one. */
  claimedCreateToFirstToolCallMs?: LatencyFigure;
  /** The same runs' phases, p50 ms each, to show where the time goes. */
  phasesP50Ms: Record<string, number>;
  /**
   * When each phase ended, ms after the create request, p50 each: the timeline. Unlike
   * phasesP50Ms it needs no creationTimestamp (whole seconds, so Queued is off by up to 1 s).
   */
  phaseEndsP50Ms: Record<string, number>;
}

/** What one mode's runs share: the cluster, its clients, where the runs' repository and script live. */
interface Bench {
  target: WarmPoolTarget;
  work: string;
  runs: number;
  /** Files beside README.md in the runs' repository, and the bytes of each (--files, --file-bytes). */
  repository: { files: number; fileBytes: number };
  kubectl: (args: string[], input?: string) => Promise<string>;
  custom: CustomObjectsApi;
}

/** Where the figures go: a larger repository (--files) writes a file of its own, which `make bench`'s report does not read. */
const resultsFileOf = (realNode: boolean, files: number) =>
  fileURLToPath(
    new URL(`./results/warm-pool${realNode ? '-real-node' : ''}${files > 0 ? `-${files + 1}-files` : ''}.json`, import.meta.url),
  );

function writeResults(file: string, results: object): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}

/**
 * The runs' namespace (with the target's PodSecurity labels), its lease namespace, the
 * repository (README.md and `files` more of `fileBytes` each, random so git cannot compress
 * them away: a repository of some size, where a clone costs what it costs users) and the
 * model's script.
 */
async function prepare(bench: Bench): Promise<void> {
  const { work, kubectl } = bench;
  const source = path.join(work, 'source');
  execFileSync('git', ['init', '-q', '-b', 'main', source]);
  writeFileSync(path.join(source, 'README.md'), 'Hello\n');
  for (let index = 0; index < bench.repository.files; index++) {
    const dir = path.join(source, 'src', String(index % 50));
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `file-${index}.txt`), randomBytes(bench.repository.fileBytes / 2).toString('hex'));
  }
  execFileSync('git', ['add', '.'], { cwd: source });
  execFileSync('git', ['-c', 'user.email=b@chamvi.dev', '-c', 'user.name=bench', 'commit', '-qm', 'readme'], { cwd: source });
  execFileSync('git', ['clone', '-q', '--bare', source, path.join(work, 'git', 'hello.git')]);
  await kubectl(
    ['create', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS, labels: bench.target.namespaceLabels } }),
  );
  await kubectl(['create', 'namespace', `${NS}-lease`]);
  // A pod is refused until its namespace has the default ServiceAccount.
  await eventually(
    async () =>
      (
        await runKubectl(['get', 'serviceaccount', 'default', '-n', NS], {
          binDir: bench.target.binDir,
          kubeconfig: bench.target.kubeconfig,
        })
      ).code === 0 || undefined,
    30_000,
    'the default ServiceAccount',
  );
  await kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'script', namespace: NS },
      data: {
        'script.json': JSON.stringify({
          turns: [{ toolCalls: [{ toolName: 'read_file', input: { path: 'README.md' } }] }, { text: 'done' }],
        }),
      },
    }),
  );
}

/** The clone cache of the third mode: room for the bench repository's archive many times over. */
const CLONE_CACHE_MAX_BYTES = 64 * 1024 * 1024;

async function startOperator(bench: Bench, label: string, pool: number, cloneCache: boolean): Promise<OperatorProcess> {
  const { target, work } = bench;
  const config = path.join(work, `config-${label}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      ...target.config,
      warmPools: pool > 0 ? [{ name: 'bench', namespace: NS, size: pool }] : [],
      ...(cloneCache ? { cloneCacheMaxBytes: CLONE_CACHE_MAX_BYTES } : {}),
    }),
  );
  const operator = new OperatorProcess({
    kubeconfig: target.kubeconfig,
    env: {
      REDIS_URL: target.redisUrl,
      CHAMVI_REDIS_PREFIX: `bench-${label}`,
      CHAMVI_ALLOW_REPO: `file://${path.join(work, 'git')}/*`,
      CHAMVI_WATCH_NAMESPACES: NS,
      CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-lease`,
      CHAMVI_CONFIG: config,
      LOG_LEVEL: 'info',
      ...target.env,
    },
  });
  await operator.waitForLog('caches synced; reconciling', 60_000);
  return operator;
}

async function waitForPool(bench: Bench, pool: number): Promise<void> {
  await eventually(
    async () => {
      const ready = await bench.kubectl([
        'get',
        'pods',
        '-n',
        NS,
        '-l',
        `${WARM_POOL_LABEL}=bench`,
        '-o',
        'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
      ]);
      return ready.split('\n').filter((line) => line === 'True').length >= pool ? true : undefined;
    },
    120_000,
    'the pool to fill',
  );
}

/** Creates run `name` and waits for it to succeed: its status.timings, and when the create request was sent. */
async function oneRun(bench: Bench, operator: OperatorProcess, name: string): Promise<{ run: CodingRun; sentAt: number }> {
  const { custom, work } = bench;
  const body = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: NS },
    spec: {
      task: 'Read the README.',
      repository: { url: `file://${path.join(work, 'git', 'hello.git')}` },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
  };
  const sentAt = Date.now();
  await custom.createNamespacedCustomObject({ group: 'chamvi.dev', version: 'v1alpha1', namespace: NS, plural: 'codingruns', body });
  const run = await eventually(
    async () => {
      const found = (await custom.getNamespacedCustomObject({
        group: 'chamvi.dev',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'codingruns',
        name,
      })) as CodingRun;
      if (found.status?.phase === 'Failed') throw new Error(`${name} failed: ${found.status.message}`);
      return found.status?.phase === 'Succeeded' ? found : undefined;
    },
    120_000,
    `${name} to succeed`,
  ).catch(async (error: unknown) => {
    const status = await bench.kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.status}']);
    const said = operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-8);
    throw new Error(`${String(error)}\n${status}\n${JSON.stringify(said)}`);
  });
  return { run, sentAt };
}

/**
 * `runs` runs one after another under an operator with a pool of `pool` (0: none) and, with
 * `cloneCache`, the clone cache on (the first run clones, the others start from its archive),
 * from each run's status.timings.
 */
async function measure(
  bench: Bench,
  label: string,
  pool: number,
  started: (operator: OperatorProcess | undefined) => void,
  cloneCache = false,
): Promise<Mode> {
  const operator = await startOperator(bench, label, pool, cloneCache);
  started(operator);
  if (pool > 0) await waitForPool(bench, pool);
  const samples: number[] = [];
  const claimedSamples: number[] = [];
  const phases = new Map<string, number[]>();
  const ends = new Map<string, number[]>();
  for (let index = 0; index < bench.runs; index++) {
    const name = `${label}-${index}`;
    const { run, sentAt } = await oneRun(bench, operator, name);
    const timings = run.status?.timings ?? [];
    const first = timings.find((entry) => entry.phase === 'FirstToolCall');
    if (!first) throw new Error(`${name}: no FirstToolCall in status.timings`);
    samples.push(Date.parse(first.start) + first.durationMs - sentAt);
    if (timings.some((entry) => entry.phase === 'SandboxClaimed')) claimedSamples.push(samples.at(-1)!);
    for (const entry of timings) {
      phases.set(entry.phase, [...(phases.get(entry.phase) ?? []), entry.durationMs]);
      ends.set(entry.phase, [...(ends.get(entry.phase) ?? []), Date.parse(entry.start) + entry.durationMs - sentAt]);
    }
  }
  await operator.kill();
  started(undefined);
  // The next mode's operator would replace these (a pool pod is one its own loop made), while
  // waitForPool counted them as its pool: each mode starts from an empty pool instead.
  if (pool > 0) await bench.kubectl(['delete', 'pods', '-n', NS, '-l', `${WARM_POOL_LABEL}=bench`, '--wait=true', '--timeout=120s']);
  return {
    createToFirstToolCallMs: latencyFigure(samples, 0),
    claimed: claimedSamples.length,
    ...(claimedSamples.length > 0 ? { claimedCreateToFirstToolCallMs: latencyFigure(claimedSamples, 0) } : {}),
    phasesP50Ms: Object.fromEntries([...phases].map(([phase, values]) => [phase, latencyFigure(values, 0).p50])),
    phaseEndsP50Ms: Object.fromEntries([...ends].map(([phase, values]) => [phase, latencyFigure(values, 0).p50])),
  };
}

function printResults(
  results: { runs: number; poolSize: number; loadAverage1m: number; cold: Mode; warm: Mode; warmCached: Mode },
  file: string,
): void {
  const { runs, poolSize, cold, warm, warmCached } = results;
  console.log(`warm pool bench (${runs} runs each, one at a time, pool of ${poolSize}; load average ${results.loadAverage1m})`);
  console.log('create -> first tool call          p50 ms    p99 ms    max ms   claimed   goal');
  const row = (name: string, figure: LatencyFigure, claimed: number, goal = '') =>
    console.log(
      `${name.padEnd(34)} ${String(figure.p50).padStart(7)}   ${String(figure.p99).padStart(7)}   ${String(figure.max).padStart(7)}   ${String(claimed).padStart(7)}   ${goal}`,
    );
  row('without a pool (fresh pod)', cold.createToFirstToolCallMs, cold.claimed);
  row('with a warm pool', warm.createToFirstToolCallMs, warm.claimed, 'p50 < 300, p99 < 1000');
  if (warm.claimedCreateToFirstToolCallMs) row('  of which claimed a pool pod', warm.claimedCreateToFirstToolCallMs, warm.claimed);
  row('with a warm pool and the clone cache', warmCached.createToFirstToolCallMs, warmCached.claimed, 'p50 < 300, p99 < 1000');
  console.log(`phases p50 ms, cold: ${JSON.stringify(cold.phasesP50Ms)}`);
  console.log(`phases p50 ms, warm: ${JSON.stringify(warm.phasesP50Ms)}`);
  console.log(`phase ends p50 ms after create, cold: ${JSON.stringify(cold.phaseEndsP50Ms)}`);
  console.log(`phase ends p50 ms after create, warm: ${JSON.stringify(warm.phaseEndsP50Ms)}`);
  console.log(`phase ends p50 ms after create, warm + clone cache: ${JSON.stringify(warmCached.phaseEndsP50Ms)}`);
  console.log(`written to ${path.relative(repoRoot, file)}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '30' },
      pool: { type: 'string', default: '3' },
      'real-node': { type: 'boolean', default: false },
      files: { type: 'string', default: '0' },
      'file-bytes': { type: 'string', default: '8192' },
    },
  });
  const repository = { files: Number(values.files), fileBytes: Number(values['file-bytes']) };
  const runs = Number(values.runs);
  const poolSize = Number(values.pool);
  const realNode = values['real-node'];
  const resultsFile = resultsFileOf(realNode, repository.files);
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-warm-bench-'));
  // Its repository and workspaces go when the process ends, however it ends but a kill.
  process.once('exit', () => rmSync(work, { recursive: true, force: true }));
  let target: WarmPoolTarget;
  try {
    target = realNode ? await realNodeTarget() : await kwokTarget(work);
  } catch (error) {
    if (!(error instanceof RealNodeUnavailable)) throw error;
    console.log(`warm pool bench on the real node SKIPPED: ${error.reason}`);
    writeResults(resultsFile, { date: new Date().toISOString(), node: process.version, skipped: error.reason });
    console.log(`written to ${path.relative(repoRoot, resultsFile)}`);
    return;
  }
  let operator: OperatorProcess | undefined;
  try {
    await applyManifestDir(target, path.join(repoRoot, 'crds'));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(target.kubeconfig);
    const bench: Bench = {
      target,
      work,
      runs,
      repository,
      kubectl: (args, input) => kubectlOrThrow(args, { binDir: target.binDir, kubeconfig: target.kubeconfig, ...(input ? { input } : {}) }),
      custom: kubeConfig.makeApiClient(CustomObjectsApi),
    };
    await prepare(bench);
    // The operator of the mode under way, for the finally below to kill when a run fails.
    const started = (running: OperatorProcess | undefined) => (operator = running);
    const cold = await measure(bench, 'cold', 0, started);
    const warm = await measure(bench, 'warm', poolSize, started);
    const warmCached = await measure(bench, 'cached', poolSize, started, true);
    const results = {
      date: new Date().toISOString(),
      loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      runs,
      poolSize,
      measured:
        'from just before the create request to the end of the first tool call (status.timings FirstToolCall), one run at a time, ' +
        `scripted model, ${target.sandboxes}, ` +
        (repository.files > 0
          ? `a repository of ${repository.files + 1} files (${repository.files} of ${repository.fileBytes} bytes)`
          : 'a one-file repository'),
      repository,
      cold,
      warm,
      warmCached,
      goal: 'warm: p50 < 300 ms, p99 < 1000 ms',
      goals: { p50UnderMs: 300, p99UnderMs: 1000 },
    };
    writeResults(resultsFile, results);
    printResults(results, resultsFile);
  } finally {
    await operator?.kill();
    await target.stop();
  }
}

await main();
