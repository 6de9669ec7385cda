// Step overhead: the time a step spends outside the model and the tools (run state in
// Redis, the status write, the Event, the next job through BullMQ), measured by the
// operator itself ("step done" log lines) on a scripted run of many read_file steps, with
// the operator as a real process against a throwaway local control plane and real exec.
//
//   npx tsx test/bench/step-bench.ts [--steps 40]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { ensureBinaries } from '../support/control-plane/binaries.ts';
import { applyManifestDir, removeStateDir, startControlPlane } from '../support/control-plane/control-plane.ts';
import { kubectlOrThrow } from '../support/control-plane/run-kubectl.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const resultsFile = fileURLToPath(new URL('./results/step.json', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { steps: { type: 'string', default: '40' } } });
  const steps = Number(values.steps);
  const binDir = ensureBinaries();
  const stateDir = mkdtempSync(path.join(tmpdir(), 'chamvi-step-bench-plane-'));
  const plane = await startControlPlane({ stateDir, binDir });
  await applyManifestDir(plane, path.join(repoRoot, 'crds'));
  const work = mkdtempSync(path.join(tmpdir(), 'chamvi-step-bench-'));
  const kubectl = (args: string[], input?: string) => kubectlOrThrow(args, { binDir, kubeconfig: plane.kubeconfig, ...(input ? { input } : {}) });
  const registrar = await startSandboxExecRegistrar({ kubeconfig: plane.kubeconfig, rootDir: path.join(work, 'workspaces') });
  let operator: OperatorProcess | undefined;
  try {
    const source = path.join(work, 'source');
    execFileSync('git', ['init', '-q', '-b', 'main', source]);
    writeFileSync(path.join(source, 'README.md'), 'Hello\n');
    execFileSync('git', ['-c', 'user.email=b@chamvi.dev', '-c', 'user.name=bench', 'commit', '-q', '--allow-empty', '-m', 'init'], { cwd: source });
    execFileSync('git', ['add', '.'], { cwd: source });
    execFileSync('git', ['-c', 'user.email=b@chamvi.dev', '-c', 'user.name=bench', 'commit', '-qm', 'readme'], { cwd: source });
    execFileSync('git', ['clone', '-q', '--bare', source, path.join(work, 'git', 'hello.git')]);
    for (const namespace of ['bench', 'bench-lease']) await kubectl(['create', 'namespace', namespace]);
    const turns = [
      ...Array.from({ length: steps - 1 }, () => ({ toolCalls: [{ toolName: 'read_file', input: { path: 'README.md' } }], usage: { inputTokens: 100, outputTokens: 10 } })),
      { text: 'done', usage: { inputTokens: 100, outputTokens: 10 } },
    ];
    operator = new OperatorProcess({
      kubeconfig: plane.kubeconfig,
      env: {
        REDIS_URL: plane.redisUrl,
        CHAMVI_ALLOW_REPO: `file://${path.join(work, 'git')}/*`,
        CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${DEFAULT_TOOLBOX_PATH}`,
        CHAMVI_WATCH_NAMESPACES: 'bench',
        CHAMVI_LEADER_ELECTION_NAMESPACE: 'bench-lease',
        LOG_LEVEL: 'info',
      },
    });
    await operator.waitForLog('caches synced; reconciling', 60_000).catch((error: unknown) => {
      console.error(operator?.lines.slice(-10).map((line) => JSON.stringify(line)).join('\n'), operator?.stderr.join(''));
      throw error;
    });
    const manifests = [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'script', namespace: 'bench' }, data: { 'script.json': JSON.stringify({ turns }) } },
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'steps', namespace: 'bench' },
        spec: { task: 'Read the README many times.', repository: { url: `file://${path.join(work, 'git', 'hello.git')}` }, model: { provider: 'scripted', scriptRef: { name: 'script' } }, budget: { maxSteps: steps + 5 } },
      },
    ];
    await kubectl(['apply', '-f', '-'], manifests.map((manifest) => stringify(manifest)).join('---\n'));
    await eventually(async () => {
      const phase = await kubectl(['get', 'crun', 'steps', '-n', 'bench', '-o', 'jsonpath={.status.phase}']);
      if (phase === 'Failed') throw new Error('the bench run failed');
      return phase === 'Succeeded' ? true : undefined;
    }, 180_000, 'the bench run to succeed');
    const lines = operator.logged('step done') as Array<{ totalMs: number; modelMs: number; toolsMs: number; overheadMs: number }>;
    // The first steps pay for cold connections (exec session, Redis, API watch); steady state is what a run lives in.
    const steady = lines.slice(2);
    const figure = (values: number[]) => ({ p50: round(percentile(values, 50)), p99: round(percentile(values, 99)) });
    const results = {
      date: new Date().toISOString(),
      steps: lines.length,
      overheadMs: figure(steady.map((line) => line.overheadMs)),
      modelMs: figure(steady.map((line) => line.modelMs)),
      toolsMs: figure(steady.map((line) => line.toolsMs)),
      totalMs: figure(steady.map((line) => line.totalMs)),
      goal: 'overhead p50 < 15 ms',
    };
    writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
    console.log(`step bench (${results.steps} steps, scripted model, read_file through a kept exec session)`);
    console.log('figure            p50 ms    p99 ms');
    for (const key of ['overheadMs', 'modelMs', 'toolsMs', 'totalMs'] as const) {
      console.log(`${key.padEnd(16)} ${String(results[key].p50).padStart(7)}   ${String(results[key].p99).padStart(7)}`);
    }
    console.log(`written to ${path.relative(repoRoot, resultsFile)}`);
  } finally {
    await operator?.kill();
    await registrar.stop();
    await plane.stop();
    removeStateDir(stateDir);
  }
}

await main();
