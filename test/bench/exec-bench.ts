// Benchmark of the exec sandbox (`make bench-exec`): the round trip of a small read_file through
// the API server and kwok, (a) a kept serve session (the operator's path: one session per run),
// (b) one pods/exec per call (the path of the workspace import, and of `call` mode), (c) `kubectl
// exec -i` of the same toolbox call, the user-facing peer, in the same run on the same pod.
//
// kubectl exec pays a process start of its own (kubectl, a Go binary that loads its kubeconfig)
// that the operator does not, so the product's paths are broken down as well, timed by a
// wrapper around the product's own transport (timed-transport.ts; nothing is added to the
// product): the connection upgrade (start() resolved: the WebSocket open through the API
// server to the kubelet), the first byte of the answer, the rest; and the toolbox alone, the
// same call on this machine without exec (a local serve session, a local `toolbox call`
// process: kwok runs the pod's command on this machine, so that is what runs in the pod).
// kubectl's process start alone is `kubectl version --client`. The costly per-call paths are
// interleaved (kubectl and the local process every fifth call) so that a noisy moment of the
// shared machine hits them alike. p99 comes from --samples (1000) calls of each product path.
// Then a workspace archive of --archive-files files of --archive-file-bytes each, imported
// the operator's way and with kubectl exec -i (exec-archive-bench.ts), --archive-runs times.
// Prints the tables and writes test/bench/results/exec.json. Goals: serve p50 < 5 ms; per-call
// exec faster than kubectl exec.
//
//   npx tsx test/bench/exec-bench.ts [--kubeconfig FILE] [--samples 1000] [--peer-every 5]
//     [--archive-files 3000] [--archive-file-bytes 8192] [--archive-runs 5]
// Without --kubeconfig it starts (and stops) a throwaway local control plane.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadavg } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { LocalProcessTransport } from '../../operator/src/sandbox/local-process-transport.ts';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import { binDir as cachedBinDir, ensureBinaries } from '../support/control-plane/binaries.ts';
import { removeStateDir, startControlPlane, type ControlPlane } from '../support/control-plane/control-plane.ts';
import { kubectlOrThrow, runKubectl } from '../support/control-plane/run-kubectl.ts';
import { startSandboxExecRegistrar, SANDBOX_POD_SELECTOR } from '../support/sandbox-exec-registrar.ts';
import { latencyFigure, type LatencyFigure } from './latency-figures.ts';
import { benchArchiveImport, printArchiveTable, printTable } from './exec-archive-bench.ts';
import { TimedTransport } from './timed-transport.ts';

const resultsFile = fileURLToPath(new URL('./results/exec.json', import.meta.url));
const toolboxCommand = [process.execPath, DEFAULT_TOOLBOX_PATH];
const request = { tool: 'read_file', input: { path: 'small.txt' } };

const figure = (samples: readonly number[]): LatencyFigure => latencyFigure(samples, 3);

async function readThrough(sandbox: Sandbox): Promise<void> {
  const response = await sandbox.call(request);
  if (!response.ok) throw new Error(response.error.message);
}

/** Times one call: the whole, and (from the transport's marks) its parts. */
async function timedCall(
  sandbox: Sandbox,
  transport: TimedTransport,
): Promise<{ totalMs: number; upgradeMs?: number; firstByteMs: number; restMs: number }> {
  transport.reset();
  const started = performance.now();
  await readThrough(sandbox);
  const ended = performance.now();
  const { startedAt, connectedAt } = transport.marks;
  // Per call, the clock of the first byte starts at the open stream; in a session, at the request.
  const from = connectedAt ?? started;
  const firstByte = transport.firstChunkSince(from);
  if (firstByte === undefined) throw new Error('no stdout chunk was seen for a call that answered');
  return {
    totalMs: ended - started,
    ...(startedAt !== undefined && connectedAt !== undefined ? { upgradeMs: connectedAt - startedAt } : {}),
    firstByteMs: firstByte - from,
    restMs: ended - firstByte,
  };
}

async function timed(once: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await once();
  return performance.now() - started;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kubeconfig: { type: 'string' },
      samples: { type: 'string', default: '1000' },
      'peer-every': { type: 'string', default: '5' },
      'archive-files': { type: 'string', default: '3000' },
      'archive-file-bytes': { type: 'string', default: '8192' },
      'archive-runs': { type: 'string', default: '5' },
    },
  });
  const samples = Number(values.samples);
  const peerEvery = Number(values['peer-every']);
  const loadAtStart = loadavg()[0] ?? 0;
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
  const kubectl = (args: string[], input?: string) =>
    kubectlOrThrow(args, { binDir, kubeconfig: kubeconfig as string, ...(input ? { input } : {}) });
  const namespace = `exec-bench-${process.pid}`;
  const podName = 'bench';
  const rootDir = mkdtempSync(path.join(tmpdir(), 'chamvi-exec-bench-'));
  const registrar = await startSandboxExecRegistrar({
    kubeconfig,
    rootDir,
    labelSelector: `${SANDBOX_POD_SELECTOR},chamvi.dev/bench=${namespace}`,
  });
  try {
    await kubectl(['create', 'namespace', namespace]);
    for (
      let attempt = 0;
      (await runKubectl(['get', 'serviceaccount', 'default', '-n', namespace], { binDir, kubeconfig })).code !== 0;
      attempt += 1
    ) {
      if (attempt > 300) throw new Error('no default ServiceAccount');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: podName, namespace, labels: { 'app.kubernetes.io/name': 'chamvi-sandbox', 'chamvi.dev/bench': namespace } },
      spec: {
        automountServiceAccountToken: false,
        containers: [{ name: 'sandbox', image: 'chamvi/sandbox:dev', command: ['sleep', 'infinity'] }],
      },
    };
    await kubectl(['create', '-f', '-'], JSON.stringify(pod));
    await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${podName}`, '--timeout=60s']);
    const workspace = await registrar.waitForWorkspace(namespace, podName);
    writeFileSync(path.join(workspace.workspaceDir, 'small.txt'), 'one\ntwo\nthree\n');

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfig);
    const target = { kubeConfig, namespace, podName, container: 'sandbox', toolboxCommand };
    const serveTransport = new TimedTransport(new KubernetesExecTransport(target));
    const perCallTransport = new TimedTransport(new KubernetesExecTransport(target));
    const serve = new ToolboxSandbox(serveTransport, { mode: 'serve' });
    const perCall = new ToolboxSandbox(perCallTransport, { mode: 'call' });
    // The toolbox alone: the same bundle, workspace and call on this machine, without exec.
    const home = mkdtempSync(path.join(tmpdir(), 'chamvi-exec-bench-home-'));
    const local = new LocalProcessTransport({ toolboxPath: DEFAULT_TOOLBOX_PATH, workspaceDir: workspace.workspaceDir, homeDir: home });
    const localServe = new ToolboxSandbox(local, { mode: 'serve' });
    const localCall = new ToolboxSandbox(local, { mode: 'call' });
    const line = encodeRequest(request);
    const kubectlExec = async () => {
      const result = await runKubectl(['exec', '-i', '-n', namespace, podName, '-c', 'sandbox', '--', ...toolboxCommand, 'call'], {
        binDir,
        kubeconfig: kubeconfig as string,
        input: line,
      });
      if (result.code !== 0 || !result.stdout.startsWith('{"ok":true')) throw new Error(`kubectl exec failed: ${result.stderr}`);
    };
    const kubectlStart = async () => {
      const result = await runKubectl(['version', '--client', '-o', 'json'], { binDir, kubeconfig: kubeconfig as string });
      if (result.code !== 0) throw new Error(`kubectl version failed: ${result.stderr}`);
    };

    // Serve sessions, exec and local alternating: twice the samples (they are cheap).
    const sessions = { total: [] as number[], firstByte: [] as number[], rest: [] as number[], local: [] as number[] };
    for (let index = 0; index < 50; index += 1) {
      await readThrough(serve);
      await readThrough(localServe);
    }
    for (let index = 0; index < samples * 2; index += 1) {
      const call = await timedCall(serve, serveTransport);
      sessions.total.push(call.totalMs);
      sessions.firstByte.push(call.firstByteMs);
      sessions.rest.push(call.restMs);
      sessions.local.push(await timed(() => readThrough(localServe)));
    }
    // One pods/exec per call, with kubectl exec, kubectl alone and a local `toolbox call` every peerEvery-th call.
    const calls = {
      total: [] as number[],
      upgrade: [] as number[],
      firstByte: [] as number[],
      rest: [] as number[],
      local: [] as number[],
      kubectl: [] as number[],
      kubectlStart: [] as number[],
    };
    for (let index = 0; index < 5; index += 1) {
      await readThrough(perCall);
      await kubectlExec();
      await readThrough(localCall);
      await kubectlStart();
    }
    for (let index = 0; index < samples; index += 1) {
      const call = await timedCall(perCall, perCallTransport);
      calls.total.push(call.totalMs);
      calls.upgrade.push(call.upgradeMs!);
      calls.firstByte.push(call.firstByteMs);
      calls.rest.push(call.restMs);
      if (index % peerEvery === 0) {
        calls.kubectl.push(await timed(kubectlExec));
        calls.local.push(await timed(() => readThrough(localCall)));
        calls.kubectlStart.push(await timed(kubectlStart));
      }
    }
    await serve.close();
    await perCall.close();
    await localServe.close();

    const archive = await benchArchiveImport({
      files: Number(values['archive-files']),
      fileBytes: Number(values['archive-file-bytes']),
      runs: Number(values['archive-runs']),
      execSandbox: () => new ToolboxSandbox(new KubernetesExecTransport(target), { mode: 'serve' }),
      localSandbox: () => new ToolboxSandbox(local, { mode: 'serve' }),
      kubectl: {
        binary: path.join(binDir, 'kubectl'),
        args: ['--kubeconfig', kubeconfig, 'exec', '-i', '-n', namespace, podName, '-c', 'sandbox', '--', ...toolboxCommand, 'import'],
      },
    });
    rmSync(home, { recursive: true, force: true });

    const results = {
      serveSession: figure(sessions.total),
      perCallExec: figure(calls.total),
      kubectlExec: figure(calls.kubectl),
    };
    const breakdown = {
      serveSession: {
        firstByte: figure(sessions.firstByte),
        firstByteToAnswer: figure(sessions.rest),
        toolboxAloneLocalServe: figure(sessions.local),
      },
      perCallExec: {
        connectionUpgrade: figure(calls.upgrade),
        upgradeToFirstByte: figure(calls.firstByte),
        firstByteToAnswer: figure(calls.rest),
        toolboxAloneLocalCall: figure(calls.local),
      },
      kubectlExec: { kubectlProcessAlone: figure(calls.kubectlStart) },
    };
    const goals = {
      servePerCallP50Under5ms: results.serveSession.p50 < 5,
      perCallExecFasterThanKubectlExec: results.perCallExec.p50 < results.kubectlExec.p50,
    };
    const rows = [
      ['path', 'p50 ms', 'p99 ms', 'n'],
      ["kept serve session over pods/exec (the operator's path)", ...figures(results.serveSession)],
      ['  request to first byte of the answer', ...figures(breakdown.serveSession.firstByte)],
      ['  first byte to the whole answer', ...figures(breakdown.serveSession.firstByteToAnswer)],
      ['  toolbox alone: a local serve session, same call', ...figures(breakdown.serveSession.toolboxAloneLocalServe)],
      ['pods/exec per call (toolbox call)', ...figures(results.perCallExec)],
      ['  connection upgrade (WebSocket open via the API server)', ...figures(breakdown.perCallExec.connectionUpgrade)],
      ['  upgrade to first byte (toolbox start and call)', ...figures(breakdown.perCallExec.upgradeToFirstByte)],
      ['  first byte to the whole answer', ...figures(breakdown.perCallExec.firstByteToAnswer)],
      ['  toolbox alone: `toolbox call` as a local process', ...figures(breakdown.perCallExec.toolboxAloneLocalCall)],
      ['kubectl exec -i (toolbox call)', ...figures(results.kubectlExec)],
      ['  kubectl process alone (kubectl version --client)', ...figures(breakdown.kubectlExec.kubectlProcessAlone)],
    ];
    printTable(rows);
    printArchiveTable(archive);
    console.log(
      `goals: serve p50 < 5 ms: ${goals.servePerCallP50Under5ms ? 'yes' : 'NO'}; per-call exec faster than kubectl exec: ${goals.perCallExecFasterThanKubectlExec ? 'yes' : 'NO'}`,
    );
    console.log(`load average ${loadAtStart.toFixed(2)} at the start, ${(loadavg()[0] ?? 0).toFixed(2)} at the end (shared machine)`);
    mkdirSync(path.dirname(resultsFile), { recursive: true });
    const loadAverage1m = { atStart: Math.round(loadAtStart * 100) / 100, atEnd: Math.round((loadavg()[0] ?? 0) * 100) / 100 };
    writeFileSync(
      resultsFile,
      `${JSON.stringify({ date: new Date().toISOString(), node: process.version, loadAverage1m, request, peerEvery, results, breakdown, goals, archive }, null, 2)}\n`,
    );
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

function figures(value: LatencyFigure): string[] {
  return [value.p50.toFixed(2), value.p99.toFixed(2), String(value.n)];
}

await main();
