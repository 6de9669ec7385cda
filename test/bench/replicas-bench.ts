// Replicas share the work (#17.1): steps per second with 1, 2 and 3 operator replicas (real
// processes, bundled as the image runs them) against one Redis, per-replica worker concurrency
// fixed, every model call answered by a real HTTP model server after a fixed delay (200 ms by
// default), every tool call a read_file through exec into a kwok pod running the real toolbox.
// Each round gets a fresh namespace and Redis prefix on one local control plane; only one
// replica leads (reconciles), every replica runs step workers.
//
// Steps per second: the "step done" lines of every replica, counted between the first and
// the last of the round. The goal (issue #17): at least 1.8x the one-replica rate at two
// replicas and 2.5x at three. Which replica did each step shows the work is shared.
//
// A replica adds steps per second only while the machine has CPU left for it, so each round
// also reports how busy the machine's cores were (/proc/stat). The series run one after
// another: 1 worker per replica (three replicas fit in two cores: the design's scaling) and
// 4 (one replica already uses about half of two cores: the machine's ceiling).
//
//   npx tsx test/bench/replicas-bench.ts [--replicas 1,2,3] [--concurrency 1,4] [--runs 24] [--steps 10] [--model-ms 200]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import { applyManifestDir, removeStateDir, startControlPlane, type ControlPlane } from '../support/control-plane/control-plane.ts';
import { kubectlOrThrow } from '../support/control-plane/run-kubectl.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply } from '../support/fake-openai-server.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { bundleOperator } from './bundled-operator.ts';
import { latencyFigure } from './latency-figures.ts';

const resultsFile = fileURLToPath(new URL('./results/replicas.json', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

interface Options {
  concurrency: number;
  runs: number;
  steps: number;
  modelMs: number;
}

interface Round {
  replicas: number;
  steps: number;
  seconds: number;
  stepsPerSecond: number;
  /** Steps done by each replica, in start order. */
  stepsByReplica: number[];
  wallSeconds: number;
  /** A step from its start to its end ("step done" totalMs), and its model call, in ms. */
  stepMs: { p50: number; p99: number };
  modelMs: { p50: number; p99: number };
  /** Share of every core's time spent busy while the runs ran (the whole machine: API server, Redis, kwok, operators, this process). */
  machineBusy: number;
}

/** Busy and total jiffies of all cores together, from the first line of /proc/stat. */
function cpuTimes(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((sum, value) => sum + value, 0);
  // idle and iowait
  return { busy: total - fields[3]! - (fields[4] ?? 0), total };
}

interface World {
  plane: ControlPlane;
  kubectl: (args: string[], input?: string) => Promise<string>;
  fake: FakeOpenAIServer;
  gitDir: string;
  entry: string;
}

/** A one-file repository, served over file:// from `dir/git/hello.git`. */
function createRepository(dir: string): void {
  const source = path.join(dir, 'source');
  const git = (args: string[]) => execFileSync('git', ['-c', 'user.email=b@chamvi.dev', '-c', 'user.name=bench', ...args], { cwd: source });
  execFileSync('git', ['init', '-q', '-b', 'main', source]);
  writeFileSync(path.join(source, 'README.md'), 'Hello\n');
  git(['add', '.']);
  git(['commit', '-qm', 'readme']);
  execFileSync('git', ['clone', '-q', '--bare', source, path.join(dir, 'git', 'hello.git')]);
}

/** A model per run: (steps - 1) read_file calls, then an answer, each after modelMs. */
function script(options: Options): FakeReply[] {
  const usage = { promptTokens: 100, completionTokens: 10 };
  return [
    ...Array.from({ length: options.steps - 1 }, (_, index) => ({
      type: 'tool-calls' as const,
      toolCalls: [{ name: 'read_file', arguments: { path: 'README.md' }, id: `call-${index}` }],
      usage,
      delayMs: options.modelMs,
    })),
    { type: 'text' as const, text: 'done', usage, delayMs: options.modelMs },
  ];
}

async function round(world: World, replicas: number, options: Options): Promise<Round> {
  const namespace = `replicas-${replicas}-c${options.concurrency}`;
  const started = Date.now();
  for (const name of [namespace, `${namespace}-lease`]) await world.kubectl(['create', 'namespace', name]);
  const start = (index: number) =>
    new OperatorProcess({
      kubeconfig: world.plane.kubeconfig,
      entry: world.entry,
      env: {
        REDIS_URL: world.plane.redisUrl,
        CHAMVI_REDIS_PREFIX: `replicas${replicas}c${options.concurrency}`,
        CHAMVI_ALLOW_REPO: `file://${world.gitDir}/*`,
        CHAMVI_ALLOW_MODEL_ENDPOINTS: world.fake.baseURL,
        CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${DEFAULT_TOOLBOX_PATH}`,
        CHAMVI_WATCH_NAMESPACES: namespace,
        CHAMVI_LEADER_ELECTION_NAMESPACE: `${namespace}-lease`,
        CHAMVI_IDENTITY: `replica-${index}`,
        CHAMVI_WORKER_CONCURRENCY: String(options.concurrency),
        CHAMVI_MAX_ACTIVE_RUNS: String(options.runs * 2),
        CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'true',
        LOG_LEVEL: 'info',
      },
    });
  const operators = [start(0)];
  try {
    await operators[0]!.waitForLog('became leader', 120_000);
    for (let index = 1; index < replicas; index++) operators.push(start(index));
    // The first leads (it started first); the others stand by as followers, running step workers.
    await operators[0]!.waitForLog('caches synced; reconciling', 120_000);
    for (const operator of operators.slice(1)) await operator.waitForLog('standing by', 120_000);
    const runs = Array.from({ length: options.runs }, (_, index) => `run-${index}`);
    for (const run of runs) world.fake.enqueueFor(`${namespace}-${run}`, ...script(options));
    const cpuBefore = cpuTimes();
    const manifests: object[] = [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'llm', namespace, labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { apiKey: 'sk-replicas-bench' },
      },
      ...runs.map((run) => ({
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: run, namespace },
        spec: {
          task: 'Read the README a few times.',
          repository: { url: `file://${path.join(world.gitDir, 'hello.git')}` },
          model: {
            provider: 'openai-compatible',
            name: `${namespace}-${run}`,
            baseURL: world.fake.baseURL,
            apiKeySecretRef: { name: 'llm' },
          },
          budget: { maxSteps: options.steps + 5, timeout: '30m' },
        },
      })),
    ];
    await world.kubectl(['apply', '-f', '-'], manifests.map((manifest) => stringify(manifest)).join('---\n'));
    await eventually(
      async () => {
        const phases = (await world.kubectl(['get', 'crun', '-n', namespace, '-o', 'jsonpath={.items[*].status.phase}'])).split(' ');
        if (phases.includes('Failed')) throw new Error(`a run failed in ${namespace}`);
        return phases.filter((phase) => phase === 'Succeeded').length === options.runs ? true : undefined;
      },
      1_200_000,
      `the ${options.runs} runs with ${replicas} replica(s) to succeed`,
    );
    const cpuAfter = cpuTimes();
    const lines = operators.map((operator) => operator.logged('step done'));
    const doneAt = lines.map((replica) => replica.map((line) => Date.parse(line.time as string)));
    const all = doneAt.flat().sort((a, b) => a - b);
    const seconds = (all.at(-1)! - all[0]!) / 1000;
    return {
      replicas,
      steps: all.length,
      seconds: Math.round(seconds * 100) / 100,
      // Steps after the first, over the time from the first to the last.
      stepsPerSecond: Math.round(((all.length - 1) / seconds) * 100) / 100,
      stepsByReplica: doneAt.map((times) => times.length),
      wallSeconds: Math.round((Date.now() - started) / 100) / 10,
      stepMs: latencyFigure(lines.flat().map((line) => line.totalMs as number)),
      modelMs: latencyFigure(lines.flat().map((line) => line.modelMs as number)),
      machineBusy: Math.round(((cpuAfter.busy - cpuBefore.busy) / (cpuAfter.total - cpuBefore.total)) * 100) / 100,
    };
  } finally {
    for (const operator of operators) await operator.kill();
    await world.kubectl(['delete', 'namespace', namespace, `${namespace}-lease`, '--wait=false']).catch(() => undefined);
  }
}

/** One worker count per replica, the replicas counts run with it, and their speed-ups over one replica. */
interface Series {
  concurrency: number;
  rounds: Round[];
  speedup: Record<number, number | undefined>;
}

function speedupOf(rounds: readonly Round[], replicas: number): number | undefined {
  const base = rounds.find((result) => result.replicas === 1)?.stepsPerSecond;
  const rate = rounds.find((result) => result.replicas === replicas)?.stepsPerSecond;
  return base && rate ? Math.round((rate / base) * 100) / 100 : undefined;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      replicas: { type: 'string', default: '1,2,3' },
      concurrency: { type: 'string', default: '1,4' },
      runs: { type: 'string', default: '24' },
      steps: { type: 'string', default: '10' },
      'model-ms': { type: 'string', default: '200' },
    },
  });
  // Each series sets its own concurrency.
  const options: Options = {
    concurrency: 0,
    runs: Number(values.runs),
    steps: Number(values.steps),
    modelMs: Number(values['model-ms']),
  };
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-replicas-bench-plane-'));
  const plane = await startControlPlane({ stateDir, binDir });
  await applyManifestDir(plane, path.join(repoRoot, 'crds'));
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-replicas-bench-'));
  const registrar = await startSandboxExecRegistrar({ kubeconfig: plane.kubeconfig, rootDir: path.join(work, 'workspaces') });
  const fake = await startFakeOpenAIServer();
  try {
    createRepository(work);
    const world: World = {
      plane,
      kubectl: (args, input) => kubectlOrThrow(args, { binDir, kubeconfig: plane.kubeconfig, ...(input ? { input } : {}) }),
      fake,
      gitDir: path.join(work, 'git'),
      entry: bundleOperator(path.join(work, 'operator')),
    };
    const series: Series[] = [];
    for (const concurrency of values.concurrency.split(',').map(Number)) {
      const rounds: Round[] = [];
      for (const replicas of values.replicas.split(',').map(Number)) {
        const result = await round(world, replicas, { ...options, concurrency });
        console.log(
          `  ${replicas} replica(s) x ${concurrency} worker(s): ${result.steps} steps in ${result.seconds} s = ${result.stepsPerSecond} steps/s (by replica: ${result.stepsByReplica.join(', ')}; step p50 ${result.stepMs.p50} ms, model p50 ${result.modelMs.p50} ms; cores ${Math.round(result.machineBusy * 100)}% busy)`,
        );
        rounds.push(result);
      }
      series.push({ concurrency, rounds, speedup: { 2: speedupOf(rounds, 2), 3: speedupOf(rounds, 3) } });
    }
    const results = {
      date: new Date().toISOString(),
      cpus: cpus().length,
      loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      runs: options.runs,
      steps: options.steps,
      modelMs: options.modelMs,
      series,
      goals: { 2: 1.8, 3: 2.5 },
    };
    writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
    console.log(
      `replicas bench: ${options.runs} runs x ${options.steps} steps, model ${options.modelMs} ms, ${results.cpus} CPUs, load ${results.loadAverage1m}`,
    );
    console.log('workers   replicas   steps/s   speed-up   cores busy   goal');
    for (const { concurrency, rounds } of series)
      for (const result of rounds)
        console.log(
          `${String(concurrency).padEnd(9)} ${String(result.replicas).padEnd(10)} ${String(result.stepsPerSecond).padEnd(9)} ${String(speedupOf(rounds, result.replicas) ?? '').padEnd(10)} ${`${Math.round(result.machineBusy * 100)}%`.padEnd(12)} ${result.replicas === 2 ? '>= 1.8x' : result.replicas === 3 ? '>= 2.5x' : ''}`,
        );
    console.log(`written to ${path.relative(repoRoot, resultsFile)}`);
  } finally {
    await fake.stop();
    await registrar.stop();
    await plane.stop();
    removeStateDir(stateDir);
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
