// What the ConfigMaps the operator owns cost it (docs/benchmarks.md, "The operator's own
// ConfigMaps, as metadata"): a run's diff snapshot, up to 1 MiB, is written again after each
// step that may have changed files, and the diffs of finished runs stay as long as their runs.
//
//   writes  the bundled operator's CPU over 2 x K writes of a 900 KB ConfigMap labelled as its own
//           (a diff snapshot), beside the same writes to one without the label, which it does
//           not watch (the peer: what the writes cost it when it receives nothing);
//   start   an operator started beside 128 such ConfigMaps of 1000 KiB, as the image starts
//           it (its 160 MiB heap limit): whether its caches sync, in how long, its peak RSS.
//
//   npx tsx test/bench/owned-configmaps-bench.ts [--writes K] [--bundle DIR]
// --bundle runs an operator bundled elsewhere (DIR/main.mjs, test/bench/bundled-operator.ts),
// e.g. an earlier commit's, for a before/after pair. Writes results/owned-configmaps.json.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import { applyManifestDir, removeStateDir, startControlPlane } from '../support/control-plane/control-plane.ts';
import { BundledOperator, bundleOperator, oneNamespaceOperatorEnv, peakRssMiB } from './bundled-operator.ts';
import { printTable } from './exec-archive-bench.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const NS = 'bench';
const MANAGED = { 'app.kubernetes.io/managed-by': 'chamvi-operator' };
const KEPT_DIFFS = 128;

const { values } = parseArgs({
  options: { writes: { type: 'string', default: '60' }, bundle: { type: 'string' } },
});
const writes = Number(values.writes);

/** CPU time (user + system) of a process so far, in ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // clock ticks of 10 ms
}

async function main() {
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-owned-cm-bench-plane-'));
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-owned-cm-bench-'));
  const plane = await startControlPlane({ stateDir, binDir });
  const operators: BundledOperator[] = [];
  try {
    await applyManifestDir(plane, path.join(repoRoot, 'crds'));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(plane.kubeconfig);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    for (const name of [NS, `${NS}-lease`]) await core.createNamespace({ body: { metadata: { name } } });
    const bundle = values.bundle ? path.join(values.bundle, 'main.mjs') : bundleOperator(path.join(work, 'operator'));
    const start = () => {
      const operator = new BundledOperator(bundle, oneNamespaceOperatorEnv(plane, NS));
      operators.push(operator);
      return operator;
    };

    // writes: the same K writes, to a ConfigMap the operator watches and to one it does not.
    const operator = start();
    await operator.waitForLog('caches synced; reconciling', 60_000);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const rewrite = async (name: string, labels: Record<string, string>) => {
      const body = (i: number) => ({ metadata: { name, labels }, data: { 'diff.patch': `${i}`.padEnd(900_000, '+') } });
      const before = cpuMs(operator.pid);
      await core.createNamespacedConfigMap({ namespace: NS, body: body(0) });
      for (let i = 1; i < writes; i += 1) await core.replaceNamespacedConfigMap({ namespace: NS, name, body: body(i) });
      await new Promise((resolve) => setTimeout(resolve, 1500)); // the last events arrive
      const spent = cpuMs(operator.pid) - before;
      await core.deleteNamespacedConfigMap({ namespace: NS, name });
      return spent;
    };
    // Two rounds, alternating, so neither side has the quieter moment to itself.
    const unwatched = { cpuMs: 0 };
    const watched = { cpuMs: 0 };
    for (let round = 0; round < 2; round += 1) {
      unwatched.cpuMs += await rewrite('not-the-operators', { other: 'x' });
      watched.cpuMs += await rewrite('diff-snapshot', MANAGED);
    }
    const perWriteMs = (watched.cpuMs - unwatched.cpuMs) / (2 * writes);
    await operator.kill();

    // start: 128 kept diffs of 1000 KiB, then an operator that must list them.
    const diff = 'd'.repeat(1000 * 1024);
    for (let i = 0; i < KEPT_DIFFS; i += 8)
      await Promise.all(
        Array.from({ length: Math.min(8, KEPT_DIFFS - i) }, (_, j) =>
          core.createNamespacedConfigMap({
            namespace: NS,
            body: { metadata: { name: `kept-diff-${i + j}`, labels: MANAGED }, data: { diff } },
          }),
        ),
      );
    const restarted = start();
    const startedAt = Date.now();
    let peak = 0;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, peakRssMiB(restarted.pid));
      } catch {
        // gone
      }
    }, 100);
    const synced = await restarted.waitForLog('caches synced; reconciling', 120_000).then(
      () => `synced in ${Date.now() - startedAt} ms`,
      (error: unknown) => (error instanceof Error ? error.message.split(':')[0]! : String(error)),
    );
    clearInterval(sampler);

    const rows: Array<[string, string, string]> = [
      [
        `operator CPU per write of a 900 KB ConfigMap labelled as its own (2 x ${writes} writes)`,
        `${perWriteMs.toFixed(2)} ms`,
        `${watched.cpuMs} ms over the writes, against ${unwatched.cpuMs} ms over the same writes to one it does not watch`,
      ],
      [`an operator started beside ${KEPT_DIFFS} kept diffs of 1000 KiB (heap limit 160 MiB)`, synced, `peak RSS ${peak.toFixed(0)} MiB`],
    ];
    printTable([['figure', 'value', 'beside it'], ...rows]);
    const results = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
      bundle: values.bundle ?? 'this checkout',
      writes: { count: writes, configMapBytes: 900_000, watchedCpuMs: watched.cpuMs, unwatchedCpuMs: unwatched.cpuMs, perWriteMs },
      start: { keptDiffs: KEPT_DIFFS, diffBytes: diff.length, outcome: synced, peakRssMiB: Math.round(peak) },
    };
    writeFileSync(path.join(repoRoot, 'test/bench/results/owned-configmaps.json'), `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    for (const operator of operators) await operator.kill();
    await plane.stop();
    removeStateDir(stateDir);
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
