// The kubectl-codingrun plugin as a process against the test control plane: the kubeconfig is
// passed as a flag and KUBECONFIG is emptied, so the plugin reads no other cluster's config.
import { kubeconfigPath } from './cluster.ts';
import { runProcess, startProcess, type ProcessResult, type StartedProcess } from './run-process.ts';

export const pluginPath = new URL('../../operator/bin/kubectl-codingrun', import.meta.url).pathname;

export function startPlugin(args: readonly string[]): StartedProcess {
  return startProcess(process.execPath, [pluginPath, '--kubeconfig', kubeconfigPath(), ...args], {
    env: { ...process.env, KUBECONFIG: '' },
  });
}

export function runPlugin(args: readonly string[]): Promise<ProcessResult> {
  return startPlugin(args).result;
}

/** The plugin without a cluster (`run --local`): the caller gives the whole environment and the directory. */
export function runLocalPlugin(args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<ProcessResult> {
  return runProcess(process.execPath, [pluginPath, ...args], { ...options, stdin: 'ignore' });
}
