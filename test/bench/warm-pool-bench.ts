// Warm sandboxes: create → first tool call of a run, with a warm pool and without, in the
// same bench run on the same throwaway control plane (kwok pods running the real toolbox).
// Each run is created with one API request, timed just before it is sent; its first tool
// call's end comes from its own status.timings (FirstToolCall, the operator's clock: the same
// machine). Runs go one after another (the next once the last succeeded), so each measures
// one run's path, not a queue; the pool refills in the background between them.
//
//   npx tsx test/bench/warm-pool-bench.ts [--runs 30] [--pool 3]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { WARM_POOL_LABEL } from '../../operator/src/reconcile/warm-pool.ts';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import { applyManifestDir, removeStateDir, startControlPlane } from '../support/control-plane/control-plane.ts';
import { kubectlOrThrow } from '../support/control-plane/run-kubectl.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { latencyFigure, type LatencyFigure } from './latency-figures.ts';

const resultsFile = fileURLToPath(new URL('./results/warm-pool.json', import.meta.url));
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

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '30' }, pool: { type: 'string', default: '3' } } });
  const runs = Number(values.runs);
  const poolSize = Number(values.pool);
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-warm-bench-plane-'));
  const plane = await startControlPlane({ stateDir, binDir });
  await applyManifestDir(plane, path.join(repoRoot, 'crds'));
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-warm-bench-'));
  const kubectl = (args: string[], input?: string) =>
    kubectlOrThrow(args, { binDir, kubeconfig: plane.kubeconfig, ...(input ? { input } : {}) });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(plane.kubeconfig);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const registrar = await startSandboxExecRegistrar({ kubeconfig: plane.kubeconfig, rootDir: path.join(work, 'workspaces') });
  let operator: OperatorProcess | undefined;
  try {
    const source = path.join(work, 'source');
    execFileSync('git', ['init', '-q', '-b', 'main', source]);
    writeFileSync(path.join(source, 'README.md'), 'Hello\n');
    execFileSync('git', ['add', '.'], { cwd: source });
    execFileSync('git', ['-c', 'user.email=b@chamvi.dev', '-c', 'user.name=bench', 'commit', '-qm', 'readme'], { cwd: source });
    execFileSync('git', ['clone', '-q', '--bare', source, path.join(work, 'git', 'hello.git')]);
    for (const namespace of [NS, `${NS}-lease`]) await kubectl(['create', 'namespace', namespace]);
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

    const measure = async (label: string, pool: number): Promise<Mode> => {
      const config = path.join(work, `config-${label}.json`);
      writeFileSync(config, JSON.stringify({ warmPools: pool > 0 ? [{ name: 'bench', namespace: NS, size: pool }] : [] }));
      operator = new OperatorProcess({
        kubeconfig: plane.kubeconfig,
        env: {
          REDIS_URL: plane.redisUrl,
          CHAMVI_REDIS_PREFIX: `bench-${label}`,
          CHAMVI_ALLOW_REPO: `file://${path.join(work, 'git')}/*`,
          CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${DEFAULT_TOOLBOX_PATH}`,
          CHAMVI_WATCH_NAMESPACES: NS,
          CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-lease`,
          CHAMVI_CONFIG: config,
          LOG_LEVEL: 'info',
        },
      });
      await operator.waitForLog('caches synced; reconciling', 60_000);
      if (pool > 0) {
        await eventually(
          async () => {
            const ready = await kubectl([
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
          60_000,
          'the pool to fill',
        );
      }
      const samples: number[] = [];
      const claimedSamples: number[] = [];
      const phases = new Map<string, number[]>();
      const ends = new Map<string, number[]>();
      let claimed = 0;
      for (let index = 0; index < runs; index++) {
        const name = `${label}-${index}`;
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
          60_000,
          `${name} to succeed`,
        ).catch(async (error: unknown) => {
          const status = await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.status}']);
          const said = operator?.lines.filter((line) => (line.level ?? 0) >= 40).slice(-8);
          throw new Error(`${String(error)}\n${status}\n${JSON.stringify(said)}`);
        });
        const timings = run.status?.timings ?? [];
        const first = timings.find((entry) => entry.phase === 'FirstToolCall');
        if (!first) throw new Error(`${name}: no FirstToolCall in status.timings`);
        samples.push(Date.parse(first.start) + first.durationMs - sentAt);
        if (timings.some((entry) => entry.phase === 'SandboxClaimed')) {
          claimed++;
          claimedSamples.push(samples.at(-1)!);
        }
        for (const entry of timings) {
          phases.set(entry.phase, [...(phases.get(entry.phase) ?? []), entry.durationMs]);
          ends.set(entry.phase, [...(ends.get(entry.phase) ?? []), Date.parse(entry.start) + entry.durationMs - sentAt]);
        }
      }
      await operator.kill();
      operator = undefined;
      return {
        createToFirstToolCallMs: latencyFigure(samples, 0),
        claimed,
        ...(claimedSamples.length > 0 ? { claimedCreateToFirstToolCallMs: latencyFigure(claimedSamples, 0) } : {}),
        phasesP50Ms: Object.fromEntries([...phases].map(([phase, values]) => [phase, latencyFigure(values, 0).p50])),
        phaseEndsP50Ms: Object.fromEntries([...ends].map(([phase, values]) => [phase, latencyFigure(values, 0).p50])),
      };
    };

    const cold = await measure('cold', 0);
    const warm = await measure('warm', poolSize);
    const results = {
      date: new Date().toISOString(),
      loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      runs,
      poolSize,
      measured:
        'from just before the create request to the end of the first tool call (status.timings FirstToolCall), one run at a time, ' +
        'scripted model, kwok pods running the real toolbox, a one-file repository',
      cold,
      warm,
      goal: 'warm: p50 < 300 ms, p99 < 1000 ms',
      goals: { p50UnderMs: 300, p99UnderMs: 1000 },
    };
    writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
    console.log(`warm pool bench (${runs} runs each, one at a time, pool of ${poolSize}; load average ${results.loadAverage1m})`);
    console.log('create -> first tool call          p50 ms    p99 ms    max ms   claimed   goal');
    for (const [name, mode, goal] of [
      ['without a pool (fresh pod)', cold, ''],
      ['with a warm pool', warm, 'p50 < 300, p99 < 1000'],
    ] as const) {
      const figure = mode.createToFirstToolCallMs;
      console.log(
        `${name.padEnd(34)} ${String(figure.p50).padStart(7)}   ${String(figure.p99).padStart(7)}   ${String(figure.max).padStart(7)}   ${String(mode.claimed).padStart(7)}   ${goal}`,
      );
    }
    if (warm.claimedCreateToFirstToolCallMs) {
      const figure = warm.claimedCreateToFirstToolCallMs;
      console.log(
        `${'  of which claimed a pool pod'.padEnd(34)} ${String(figure.p50).padStart(7)}   ${String(figure.p99).padStart(7)}   ${String(figure.max).padStart(7)}   ${String(warm.claimed).padStart(7)}`,
      );
    }
    console.log(`phases p50 ms, cold: ${JSON.stringify(cold.phasesP50Ms)}`);
    console.log(`phases p50 ms, warm: ${JSON.stringify(warm.phasesP50Ms)}`);
    console.log(`phase ends p50 ms after create, cold: ${JSON.stringify(cold.phaseEndsP50Ms)}`);
    console.log(`phase ends p50 ms after create, warm: ${JSON.stringify(warm.phaseEndsP50Ms)}`);
    console.log(`written to ${path.relative(repoRoot, resultsFile)}`);
  } finally {
    await operator?.kill();
    await registrar.stop();
    await plane.stop();
    removeStateDir(stateDir);
  }
}

await main();
