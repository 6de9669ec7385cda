// The kubectl-codingrun plugin as a process against the test control plane: the kubeconfig is
// passed as a flag and KUBECONFIG is emptied, so the plugin reads no other cluster's config.
import { kubeconfigPath } from './cluster.ts';
import { runProcess, startProcess, type ProcessResult, type StartedProcess } from './run-process.ts';

/** The plugin's JavaScript, which these run with this test's node; the launcher that finds a node for it is pluginLauncherPath. */
export const pluginPath = new URL('../../operator/bin/plugin-entry.mjs', import.meta.url).pathname;
/** operator/bin/kubectl-codingrun: the shell script on PATH that checks the node it finds, then runs pluginPath with it. */
export const pluginLauncherPath = new URL('../../operator/bin/kubectl-codingrun', import.meta.url).pathname;

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

/**
 * The arguments of the approve command the plugin printed (`get NAME`, `get NAME --input`, or a
 * bare `approve NAME`, which writes nothing): `approve NAME -n NS --id ID --sha256 HASH --uid UID`.
 */
export function printedApproveCommand(output: string): string[] {
  const command = /kubectl codingrun (approve \S+ -n \S+ --id \S+ --sha256 [0-9a-f]{64} --uid [0-9a-f-]+)/.exec(output)?.[1];
  if (!command) throw new Error(`no approve command in the plugin's output:\n${output}`);
  return command.split(' ');
}

/**
 * Approves as a person does: a bare `approve NAME ...` shows the pending call and writes nothing
 * (exit 1), then the command it printed approves exactly the input shown.
 */
export async function approveAsShown(args: readonly string[], run: (args: readonly string[]) => Promise<ProcessResult> = runPlugin) {
  const shown = await run(['approve', ...args]);
  if (shown.code !== 1) throw new Error(`a bare approve exited ${String(shown.code)}:\n${shown.stdout}${shown.stderr}`);
  return { shown, approved: await run(printedApproveCommand(`${shown.stdout}\n${shown.stderr}`)) };
}
