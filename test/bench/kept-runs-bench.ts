// What finished CodingRuns that stay in the cluster cost the operator (docs/benchmarks.md,
// "Kept runs"). Its run cache holds every run in the namespaces it watches for as long as the
// run exists: without ttlSecondsAfterFinished, every run a fleet ever ran.
//
// K finished runs are made as a run's life makes them (kubectl's create with its
// last-applied annotation, the operator's finalizer, its status writes as two field managers,
// so each carries the managedFields a real one does), then each operator build is started
// beside them in turn, as the image starts it (its 160 MiB heap limit): whether its caches
// sync, in how long, its peak RSS, and its RSS and heap 20 s after (every run reconciled once).
//
//   npx tsx test/bench/kept-runs-bench.ts [--runs K] [--bundle DIR ...] [--rounds R]
// Each --bundle runs an operator bundled elsewhere (DIR/main.mjs, test/bench/bundled-operator.ts),
// e.g. an earlier commit's, beside this checkout's, alternating for R rounds (default 2).
// Writes results/kept-runs.json.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, FINALIZER, PLURAL } from '../../operator/src/api/index.ts';
import { jsonRequests, JSON_PATCH } from '../../operator/src/kube/json-requests.ts';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import { applyManifestDir, removeStateDir, startControlPlane } from '../support/control-plane/control-plane.ts';
import { BundledOperator, bundleOperator, oneNamespaceOperatorEnv, peakRssMiB } from './bundled-operator.ts';
import { printTable } from './exec-archive-bench.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const NS = 'bench';
const MERGE_PATCH = 'application/merge-patch+json';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '10000' },
    bundle: { type: 'string', multiple: true, default: [] },
    rounds: { type: 'string', default: '2' },
  },
});
const keptRuns = Number(values.runs);
const rounds = Number(values.rounds);

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** A finished run's status as the operator writes it (a 2-step run that changed one file). */
function finishedStatus(name: string, at: string) {
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    observedGeneration: 1,
    lastTransitionTime: at,
  });
  const summary = 'Finished in 2 step(s): 1 file(s) changed.';
  return {
    phase: 'Succeeded',
    reason: 'Completed',
    message: summary,
    observedGeneration: 1,
    admission: { sequence: 1, time: at },
    startTime: at,
    completionTime: at,
    podName: `${name}-0123456789abcdef-sandbox`,
    conditions: [
      condition('Accepted', 'True', 'Valid', 'The run is valid.'),
      condition('SandboxReady', 'False', 'RunFinished', 'The sandbox is removed once the run ends.'),
      condition('Ready', 'True', 'Completed', summary),
      condition('Reconciling', 'False', 'Completed', 'The run has finished: Succeeded.'),
      condition('Succeeded', 'True', 'Completed', summary),
    ],
    result: {
      summary: 'Done.',
      filesChanged: 1,
      insertions: 1,
      deletions: 1,
      diff: 'diff --git a/README.md b/README.md\nindex e965047..a5c1966 100644\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n',
      diffConfigMap: `${name}-0123456789abcdef-diff`,
      diffSource: 'final',
      diffTruncated: false,
      revision: 'ab66aa514677a6237794484d4787edc71b50bf1b',
    },
  };
}

/** What the steps add to it (the worker's progress writes, another field manager). */
function progress(at: string) {
  const phases = ['Queued', 'PodScheduled', 'PodReady', 'Clone', 'Import', 'Setup', 'FirstModelCall', 'FirstToolCall', 'Finalize'];
  return [
    { op: 'add', path: '/status/steps', value: 2 },
    { op: 'add', path: '/status/toolCalls', value: 1 },
    {
      op: 'add',
      path: '/status/usage',
      value: { inputTokens: 1200, outputTokens: 80, totalTokens: 1280, reasoningTokens: 0, cacheReadTokens: 0, complete: true },
    },
    { op: 'add', path: '/status/timings', value: phases.map((phase, i) => ({ phase, start: at, durationMs: 20 * (i + 1) })) },
  ];
}

async function inParallel(count: number, limit: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

interface Outcome {
  bundle: string;
  round: number;
  synced: string;
  syncMs?: number;
  peakRssMiB: number;
  rssAfterMiB?: number;
  heapUsedAfterMiB?: number;
}

async function main() {
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-kept-runs-bench-plane-'));
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-kept-runs-bench-'));
  const plane = await startControlPlane({ stateDir, binDir });
  const operators: BundledOperator[] = [];
  try {
    await applyManifestDir(plane, path.join(repoRoot, 'crds'));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(plane.kubeconfig);
    const json = jsonRequests(kubeConfig);
    for (const name of [NS, `${NS}-lease`]) await json.send('POST', '/api/v1/namespaces', { metadata: { name } });
    const bundles = [
      ['this checkout', bundleOperator(path.join(work, 'operator'))],
      ...values.bundle.map((dir) => [dir, path.join(dir, 'main.mjs')] as const),
    ] as const;

    const runs = `/apis/${API_VERSION}/namespaces/${NS}/${PLURAL}`;
    const madeAt = Date.now();
    const at = new Date().toISOString();
    await inParallel(keptRuns, 16, async (i) => {
      const name = `kept-${i}`;
      const run = {
        apiVersion: API_VERSION,
        kind: 'CodingRun',
        metadata: { name, namespace: NS },
        spec: {
          task: 'Greet the world.',
          repository: { url: 'https://github.com/acme/webapp.git' },
          model: { provider: 'scripted', scriptRef: { name: 'edit-then-done' } },
          sandbox: { setup: 'true' },
        },
      };
      const applied = {
        ...run,
        metadata: { ...run.metadata, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': `${JSON.stringify(run)}\n` } },
      };
      await json.sendIgnoringAnswer('POST', `${runs}?fieldManager=kubectl-client-side-apply`, applied);
      await json.sendIgnoringAnswer(
        'PATCH',
        `${runs}/${name}?fieldManager=chamvi-operator`,
        { metadata: { finalizers: [FINALIZER] } },
        MERGE_PATCH,
      );
      await json.sendIgnoringAnswer(
        'PATCH',
        `${runs}/${name}/status?fieldManager=chamvi-operator`,
        { status: finishedStatus(name, at) },
        MERGE_PATCH,
      );
      await json.sendIgnoringAnswer('PATCH', `${runs}/${name}/status?fieldManager=chamvi-worker`, progress(at), JSON_PATCH);
    });
    const list = await json.get<{ items: unknown[] }>(runs);
    const listBytes = JSON.stringify(list).length;
    console.log(
      `${keptRuns} finished runs made in ${((Date.now() - madeAt) / 1000).toFixed(1)} s; their list is ${(listBytes / 2 ** 20).toFixed(1)} MiB of JSON`,
    );

    const outcomes: Outcome[] = [];
    for (let round = 1; round <= rounds; round += 1) {
      for (const [label, bundle] of round % 2 === 1 ? bundles : [...bundles].reverse()) {
        const operator = new BundledOperator(bundle, oneNamespaceOperatorEnv(plane, NS));
        operators.push(operator);
        const startedAt = Date.now();
        let peak = 0;
        const sample = () => {
          try {
            peak = Math.max(peak, peakRssMiB(operator.pid));
          } catch {
            // gone
          }
        };
        const sampler = setInterval(sample, 100);
        const outcome: Outcome = await operator.waitForLog('caches synced; reconciling', 180_000).then(
          () => ({ bundle: label, round, synced: 'synced', syncMs: Date.now() - startedAt, peakRssMiB: 0 }),
          (error: unknown) => ({
            bundle: label,
            round,
            synced: error instanceof Error ? error.message.split(':')[0]!.slice(0, 80) : String(error),
            peakRssMiB: 0,
          }),
        );
        if (outcome.syncMs !== undefined) {
          // Every run is reconciled once after the sync; then the operator has only its timers.
          await new Promise((resolve) => setTimeout(resolve, 20_000));
          sample();
          try {
            outcome.rssAfterMiB = Math.round(rssMiB(operator.pid) * 10) / 10;
            const heap = await operator.metric('chamvi_operator_nodejs_heap_size_used_bytes');
            outcome.heapUsedAfterMiB = Math.round((heap / 2 ** 20) * 10) / 10;
          } catch (error) {
            outcome.synced = `ended after the sync (${String(error).slice(0, 60)})`;
          }
        }
        clearInterval(sampler);
        outcome.peakRssMiB = Math.round(peak * 10) / 10;
        outcomes.push(outcome);
        console.log(JSON.stringify(outcome));
        await operator.kill();
      }
    }

    printTable([
      ['operator', 'round', `beside ${keptRuns} finished runs (heap limit 160 MiB)`, 'peak RSS, MiB', 'RSS / heap used 20 s after, MiB'],
      ...outcomes.map((each) => [
        each.bundle,
        String(each.round),
        each.syncMs === undefined ? each.synced : `synced in ${(each.syncMs / 1000).toFixed(1)} s`,
        each.peakRssMiB.toFixed(1),
        each.rssAfterMiB === undefined ? '' : `${each.rssAfterMiB} / ${each.heapUsedAfterMiB}`,
      ]),
    ]);
    const results = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
      keptRuns,
      listMiB: Math.round((listBytes / 2 ** 20) * 10) / 10,
      outcomes,
    };
    writeFileSync(path.join(repoRoot, 'test/bench/results/kept-runs.json'), `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    for (const operator of operators) await operator.kill();
    await plane.stop();
    removeStateDir(stateDir);
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
