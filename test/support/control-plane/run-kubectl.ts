// Runs the cache's kubectl against a kubeconfig and collects its output. The control plane
// uses it to apply manifests; test/support/cluster.ts wraps it for tests.
import { spawn } from 'node:child_process';
import { join } from 'node:path';

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

export function runKubectl(args: readonly string[], options: RunKubectlOptions): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(options.binDir, 'kubectl'), ['--kubeconfig', options.kubeconfig, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, KUBECONFIG: options.kubeconfig },
      timeout: options.timeoutMs ?? 120_000,
      killSignal: 'SIGKILL',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
    child.stdin.on('error', () => {
      // kubectl may exit before reading all input; its exit code tells the story.
    });
    child.stdin.end(options.input ?? '');
  });
}

/** runKubectl that throws with kubectl's stderr when it fails. */
export async function kubectlOrThrow(args: readonly string[], options: RunKubectlOptions): Promise<string> {
  const result = await runKubectl(args, options);
  if (result.code !== 0) {
    throw new Error(`kubectl ${args.join(' ')} failed (exit ${result.code}): ${result.stderr.trim()}`);
  }
  return result.stdout;
}
