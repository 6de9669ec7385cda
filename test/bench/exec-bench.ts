// Benchmark of the exec sandbox (`make bench-exec`): the round trip of a small read_file through
// the API server and kwok, (a) one pods/exec per call, (b) a kept serve session, (c) `kubectl
// exec -i` of the same toolbox call, in the same run on the same pod. Prints a table and writes
// test/bench/results/exec.json. Goals: serve p50 < 5 ms; per-call exec faster than kubectl exec.
//
//   npx tsx test/bench/exec-bench.ts [--kubeconfig FILE] [--samples N]
// Without --kubeconfig it starts (and stops) a throwaway local control plane.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { createKubernetesSandbox } from '../../operator/src/sandbox/kubernetes-sandbox.ts';
import { encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { binDir as cachedBinDir, ensureBinaries } from '../support/control-plane/binaries.ts';
import { removeStateDir, startControlPlane, type ControlPlane } from '../support/control-plane/control-plane.ts';
import { kubectlOrThrow, runKubectl } from '../support/control-plane/run-kubectl.ts';
import { startSandboxExecRegistrar, SANDBOX_POD_SELECTOR } from '../support/sandbox-exec-registrar.ts';

const resultsFile = fileURLToPath(new URL('./results/exec.json', import.meta.url));
const toolboxCommand = [process.execPath, DEFAULT_TOOLBOX_PATH];
const request = { tool: 'read_file', input: { path: 'small.txt' } };

interface Figure {
  p50: number;
  p99: number;
  n: number;
}

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}
const round = (value: number) => Math.round(value * 1000) / 1000;

async function measure(warmup: number, samples: number, once: () => Promise<void>): Promise<Figure> {
  for (let index = 0; index < warmup; index += 1) await once();
  const times: number[] = [];
  for (let index = 0; index < samples; index += 1) {
    const started = performance.now();
    await once();
    times.push(performance.now() - started);
  }
  return { p50: round(percentile(times, 50)), p99: round(percentile(times, 99)), n: samples };
}

async function readThrough(sandbox: Sandbox): Promise<void> {
  const response = await sandbox.call(request);
  if (!response.ok) throw new Error(response.error.message);
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { kubeconfig: { type: 'string' }, samples: { type: 'string', default: '50' } } });
  const samples = Number(values.samples);
  let plane: ControlPlane | undefined;
  let kubeconfig = values.kubeconfig;
  let binDir: string;
  if (kubeconfig) binDir = cachedBinDir();
  else {
    binDir = ensureBinaries();
    const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-control-plane-'));
    plane = await startControlPlane({ stateDir, binDir });
    kubeconfig = plane.kubeconfig;
  }
  const kubectl = (args: string[], input?: string) => kubectlOrThrow(args, { binDir, kubeconfig: kubeconfig as string, ...(input ? { input } : {}) });
  const namespace = `exec-bench-${process.pid}`;
  const podName = 'bench';
  const rootDir = mkdtempSync(path.join(tmpdir(), 'chamvi-exec-bench-'));
  const registrar = await startSandboxExecRegistrar({ kubeconfig, rootDir, labelSelector: `${SANDBOX_POD_SELECTOR},chamvi.dev/bench=${namespace}` });
  try {
    await kubectl(['create', 'namespace', namespace]);
    for (let attempt = 0; (await runKubectl(['get', 'serviceaccount', 'default', '-n', namespace], { binDir, kubeconfig })).code !== 0; attempt += 1) {
      if (attempt > 300) throw new Error('no default ServiceAccount');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: podName, namespace, labels: { 'app.kubernetes.io/name': 'chamvi-sandbox', 'chamvi.dev/bench': namespace } },
      spec: { automountServiceAccountToken: false, containers: [{ name: 'sandbox', image: 'chamvi/sandbox:dev', command: ['sleep', 'infinity'] }] },
    };
    await kubectl(['create', '-f', '-'], JSON.stringify(pod));
    await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${podName}`, '--timeout=60s']);
    const workspace = await registrar.waitForWorkspace(namespace, podName);
    writeFileSync(path.join(workspace.workspaceDir, 'small.txt'), 'one\ntwo\nthree\n');

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfig);
    const target = { kubeConfig, namespace, podName, container: 'sandbox', toolboxCommand };
    const perCall = createKubernetesSandbox({ ...target, mode: 'call' });
    const serve = createKubernetesSandbox({ ...target, mode: 'serve' });
    const line = encodeRequest(request);
    const kubectlExec = async () => {
      const result = await runKubectl(['exec', '-i', '-n', namespace, podName, '-c', 'sandbox', '--', ...toolboxCommand, 'call'], { binDir, kubeconfig: kubeconfig as string, input: line });
      if (result.code !== 0 || !result.stdout.startsWith('{"ok":true')) throw new Error(`kubectl exec failed: ${result.stderr}`);
    };
    const results = {
      perCallExec: await measure(5, samples, () => readThrough(perCall)),
      serveSession: await measure(50, samples * 10, () => readThrough(serve)),
      kubectlExec: await measure(5, samples, kubectlExec),
    };
    await serve.close();
    await perCall.close();

    const goals = {
      servePerCallP50Under5ms: results.serveSession.p50 < 5,
      perCallExecFasterThanKubectlExec: results.perCallExec.p50 < results.kubectlExec.p50,
    };
    const rows = [
      ['path', 'p50 ms', 'p99 ms', 'n'],
      ['pods/exec per call (toolbox call)', ...figures(results.perCallExec)],
      ['kept serve session over pods/exec', ...figures(results.serveSession)],
      ['kubectl exec -i (toolbox call)', ...figures(results.kubectlExec)],
    ];
    const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
    for (const row of rows) console.log(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  '));
    console.log(`goals: serve p50 < 5 ms: ${goals.servePerCallP50Under5ms ? 'yes' : 'NO'}; per-call exec faster than kubectl exec: ${goals.perCallExecFasterThanKubectlExec ? 'yes' : 'NO'}`);
    mkdirSync(path.dirname(resultsFile), { recursive: true });
    writeFileSync(resultsFile, `${JSON.stringify({ date: new Date().toISOString(), node: process.version, request, results, goals }, null, 2)}\n`);
    console.log(`written to ${path.relative(process.cwd(), resultsFile)}`);
  } finally {
    await registrar.stop();
    await runKubectl(['delete', 'namespace', namespace, '--wait=false'], { binDir, kubeconfig });
    rmSync(rootDir, { recursive: true, force: true });
    if (plane) {
      await plane.stop();
      removeStateDir(plane.stateDir);
    }
  }
}

function figures(figure: Figure): string[] {
  return [figure.p50.toFixed(2), figure.p99.toFixed(2), String(figure.n)];
}

await main();
