// Benchmark on the real node (`make bench-real-node`, part of `make bench`): the operator's
// sandbox pod from the sandbox image on a real kubelet + containerd + runc node
// (test/support/real-node/real-node.ts), reached through the API server, the kubelet and CRI
// streaming, as on any cluster:
//   - sandbox pod create to Ready, and create to the first tool call answered (the operator's
//     path: create the pod, wait for Ready, open a serve session, call), for --pods pods one
//     after another; the first is the node's first container from the image (cold);
//   - a small read_file through a kept `serve` session (the operator's path), p50 / p99;
//   - the same call with one pods/exec per call (`call` mode, the import's path), p50, against
//     `kubectl exec -i` of the same toolbox call into the same container (interleaved, every
//     --peer-every calls, so a noisy moment of the shared machine hits both alike);
//   - a workspace archive into the pod, the operator's way and with kubectl exec -i
//     (exec-archive-bench.ts; --archive-files, --archive-file-bytes, --archive-runs).
// The kwok figures of the same paths are exec-bench.ts's (exec.json); these are real-node.json.
// When the node cannot start here (not root, a package or binary missing, another real node
// running), it writes the reason to real-node.json and exits 0: the report shows it skipped.
//
//   npx tsx test/bench/real-node-bench.ts [--pods 5] [--samples 1000] [--per-call-samples 100] [--peer-every 2]
//     [--archive-files 3000] [--archive-file-bytes 8192] [--archive-runs 5]
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { SANDBOX_CONTAINER } from '../../operator/src/reconcile/sandbox-pod.ts';
import { createKubernetesSandbox } from '../../operator/src/sandbox/kubernetes-sandbox.ts';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { kubectlOrThrow, runKubectl } from '../support/control-plane/run-kubectl.ts';
import { startPlaneWithRealNode, type PlaneWithRealNode } from '../support/real-node/plane-with-real-node.ts';
import { RealNodeUnavailable } from '../support/real-node/real-node.ts';
import { realNodeOperatorConfig, realNodeSandboxPod } from '../support/real-node/sandbox-pods.ts';
import { benchArchiveImport, printArchiveTable, printTable } from './exec-archive-bench.ts';
import { latencyFigure } from './latency-figures.ts';

const resultsFile = fileURLToPath(new URL('./results/real-node.json', import.meta.url));
const request = { tool: 'read_file', input: { path: 'small.txt' } };

function write(result: object): void {
  mkdirSync(path.dirname(resultsFile), { recursive: true });
  writeFileSync(resultsFile, `${JSON.stringify({ date: new Date().toISOString(), node: process.version, ...result }, null, 2)}\n`);
  console.log(`written to ${path.relative(process.cwd(), resultsFile)}`);
}

async function timed(once: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await once();
  return performance.now() - started;
}

async function readThrough(sandbox: Sandbox): Promise<void> {
  const response = await sandbox.call(request);
  if (!response.ok) throw new Error(response.error.message);
}

const isReady = (pod: V1Pod) =>
  pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '5' },
      samples: { type: 'string', default: '1000' },
      'per-call-samples': { type: 'string', default: '100' },
      'peer-every': { type: 'string', default: '2' },
      'archive-files': { type: 'string', default: '3000' },
      'archive-file-bytes': { type: 'string', default: '8192' },
      'archive-runs': { type: 'string', default: '5' },
    },
  });
  const podCount = Number(values.pods);
  const samples = Number(values.samples);
  const perCallSamples = Number(values['per-call-samples']);
  const peerEvery = Number(values['peer-every']);
  const loadAtStart = loadavg()[0] ?? 0;

  let started: PlaneWithRealNode | undefined;
  try {
    try {
      started = await startPlaneWithRealNode();
    } catch (error) {
      if (!(error instanceof RealNodeUnavailable)) throw error;
      console.log(`real-node bench SKIPPED: ${error.reason}`);
      write({ skipped: error.reason });
      return;
    }
    const { binDir, node, sandboxImage } = started;
    const kubeconfig = started.plane.kubeconfig;
    const kubectl = (args: string[], input?: string) => kubectlOrThrow(args, { binDir, kubeconfig, ...(input ? { input } : {}) });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfig);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const namespace = `real-node-bench-${process.pid}`;
    await kubectl(['create', 'namespace', namespace]);
    await kubectl(['label', 'namespace', namespace, 'pod-security.kubernetes.io/enforce=restricted']);
    for (
      let attempt = 0;
      (await runKubectl(['get', 'serviceaccount', 'default', '-n', namespace], { binDir, kubeconfig })).code !== 0;
      attempt++
    ) {
      if (attempt > 300) throw new Error('no default ServiceAccount');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const toolboxCommand = realNodeOperatorConfig(sandboxImage.ref).toolboxCommand;
    const sandboxOf = (podName: string, mode: 'serve' | 'call') =>
      createKubernetesSandbox({ kubeConfig, namespace, podName, container: SANDBOX_CONTAINER, toolboxCommand, mode });

    // Pods one after another: create -> Ready -> first tool call answered through a new serve session.
    const toReady: number[] = [];
    const toFirstCall: number[] = [];
    let podName = '';
    for (let index = 0; index < podCount; index += 1) {
      const pod = realNodeSandboxPod(
        namespace,
        `bench-${index}`,
        `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`,
        sandboxImage.ref,
      );
      if (podName) await core.deleteNamespacedPod({ name: podName, namespace, gracePeriodSeconds: 0 });
      podName = pod.metadata!.name!;
      const created = performance.now();
      await core.createNamespacedPod({ namespace, body: pod });
      for (;;) {
        if (isReady(await core.readNamespacedPod({ name: podName, namespace }))) break;
        if (performance.now() - created > 180_000) throw new Error(`pod ${podName} not Ready after 180 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      toReady.push(performance.now() - created);
      const first = sandboxOf(podName, 'serve');
      const answer = await first.call({ tool: 'list_files', input: {} });
      if (!answer.ok) throw new Error(answer.error.message);
      toFirstCall.push(performance.now() - created);
      await first.close();
    }

    const serve = sandboxOf(podName, 'serve');
    const perCall = sandboxOf(podName, 'call');
    const written = await serve.call({ tool: 'write_file', input: { path: 'small.txt', content: 'one\ntwo\nthree\n' } });
    if (!written.ok) throw new Error(written.error.message);
    const line = encodeRequest(request);
    const kubectlExec = async () => {
      const result = await runKubectl(['exec', '-i', '-n', namespace, podName, '-c', SANDBOX_CONTAINER, '--', ...toolboxCommand, 'call'], {
        binDir,
        kubeconfig,
        input: line,
      });
      if (result.code !== 0 || !result.stdout.startsWith('{"ok":true')) throw new Error(`kubectl exec failed: ${result.stderr}`);
    };

    for (let index = 0; index < 50; index += 1) await readThrough(serve);
    const sessionSamples: number[] = [];
    for (let index = 0; index < samples; index += 1) sessionSamples.push(await timed(() => readThrough(serve)));
    for (let index = 0; index < 3; index += 1) {
      await readThrough(perCall);
      await kubectlExec();
    }
    const perCallTimes: number[] = [];
    const kubectlTimes: number[] = [];
    for (let index = 0; index < perCallSamples; index += 1) {
      perCallTimes.push(await timed(() => readThrough(perCall)));
      if (index % peerEvery === 0) kubectlTimes.push(await timed(kubectlExec));
    }
    await serve.close();
    await perCall.close();

    const archive = await benchArchiveImport({
      files: Number(values['archive-files']),
      fileBytes: Number(values['archive-file-bytes']),
      runs: Number(values['archive-runs']),
      execSandbox: () => sandboxOf(podName, 'serve'),
      kubectl: {
        binary: path.join(binDir, 'kubectl'),
        args: [
          '--kubeconfig',
          kubeconfig,
          'exec',
          '-i',
          '-n',
          namespace,
          podName,
          '-c',
          SANDBOX_CONTAINER,
          '--',
          ...toolboxCommand,
          'import',
        ],
      },
    });

    const results = {
      podCreateToReady: { first: Math.round(toReady[0]!), ...latencyFigure(toReady, 0) },
      podCreateToFirstToolCall: { first: Math.round(toFirstCall[0]!), ...latencyFigure(toFirstCall, 0) },
      serveSession: latencyFigure(sessionSamples, 2),
      perCallExec: latencyFigure(perCallTimes, 1),
      kubectlExec: latencyFigure(kubectlTimes, 1),
    };
    const goals = { perCallExecFasterThanKubectlExec: results.perCallExec.p50 < results.kubectlExec.p50 };
    const rows = [
      ['on the real node', 'p50', 'p99', 'first (cold)', 'n'],
      [
        'sandbox pod create -> Ready (ms)',
        `${results.podCreateToReady.p50}`,
        `${results.podCreateToReady.p99}`,
        `${results.podCreateToReady.first}`,
        `${toReady.length}`,
      ],
      [
        'sandbox pod create -> first tool call answered (ms)',
        `${results.podCreateToFirstToolCall.p50}`,
        `${results.podCreateToFirstToolCall.p99}`,
        `${results.podCreateToFirstToolCall.first}`,
        `${toFirstCall.length}`,
      ],
      ['read_file, kept serve session (ms)', `${results.serveSession.p50}`, `${results.serveSession.p99}`, '', `${results.serveSession.n}`],
      [
        'read_file, one pods/exec per call (ms)',
        `${results.perCallExec.p50}`,
        `${results.perCallExec.p99}`,
        '',
        `${results.perCallExec.n}`,
      ],
      ['read_file, kubectl exec -i (ms)', `${results.kubectlExec.p50}`, `${results.kubectlExec.p99}`, '', `${results.kubectlExec.n}`],
    ];
    printTable(rows);
    printArchiveTable(archive);
    console.log(`goal: per-call exec faster than kubectl exec: ${goals.perCallExecFasterThanKubectlExec ? 'yes' : 'NO'}`);
    const loadAverage1m = { atStart: Math.round(loadAtStart * 100) / 100, atEnd: Math.round((loadavg()[0] ?? 0) * 100) / 100 };
    console.log(`load average ${loadAverage1m.atStart} at the start, ${loadAverage1m.atEnd} at the end (shared machine)`);
    write({ loadAverage1m, nodeStartSeconds: node.startSeconds, request, peerEvery, results, goals, archive });
  } finally {
    await started?.stop();
  }
}

await main();
