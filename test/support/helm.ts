// The cache's helm against the test control plane, with its cache and config kept under /tmp
// so a test never reads or writes the user's own helm state.
import { join } from 'node:path';
import { controlPlaneBin, kubeconfigPath } from './cluster.ts';
import { runProcess, type ProcessResult } from './run-process.ts';

export const chartDir = new URL('../../charts/chamvi-operator/', import.meta.url).pathname;

export function helm(args: readonly string[]): Promise<ProcessResult> {
  return runProcess(join(controlPlaneBin(), 'helm'), args, {
    env: {
      ...process.env,
      KUBECONFIG: kubeconfigPath(),
      HELM_CACHE_HOME: '/tmp/chamvi-helm-cache',
      HELM_CONFIG_HOME: '/tmp/chamvi-helm-config',
    },
  });
}
