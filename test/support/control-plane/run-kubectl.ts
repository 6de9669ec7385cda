// Runs the cache's kubectl against a kubeconfig and collects its output. The control plane
// uses it to apply manifests; test/support/cluster.ts wraps it for tests.
import { join } from 'node:path';
import { runProcess } from '../run-process.ts';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunKubectlOptions {
  binDir: string;
  kubeconfig: string;
  input?: string;
  timeoutMs?: number;
}

export async function runKubectl(args: readonly string[], options: RunKubectlOptions): Promise<KubectlResult> {
  const { code, signal, stdout, stderr } = await runProcess(
    join(options.binDir, 'kubectl'),
    ['--kubeconfig', options.kubeconfig, ...args],
    {
      env: { ...process.env, KUBECONFIG: options.kubeconfig },
      input: options.input ?? '',
      timeoutMs: options.timeoutMs ?? 120_000,
    },
  );
  return { code: code ?? (signal ? 128 : 1), stdout, stderr };
}

/** runKubectl that throws with kubectl's stderr when it fails. */
export async function kubectlOrThrow(args: readonly string[], options: RunKubectlOptions): Promise<string> {
  const result = await runKubectl(args, options);
  if (result.code !== 0) {
    throw new Error(`kubectl ${args.join(' ')} failed (exit ${result.code}): ${result.stderr.trim()}`);
  }
  return result.stdout;
}
