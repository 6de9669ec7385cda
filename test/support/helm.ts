// The cache's helm against the test control plane, with its cache and config kept under /tmp
// so a test never reads or writes the user's own helm state.
import { basename, dirname, join } from 'node:path';
import { controlPlaneBin, kubeconfigPath } from './cluster.ts';
import { runProcess, type ProcessResult } from './run-process.ts';

export const chartDir = new URL('../../charts/chamvi-operator/', import.meta.url).pathname;

/**
 * `helm template` renders for the Kubernetes version and API groups it was built with, which
 * for the helm built here are v1.20's: older than the chart's kubeVersion, and without
 * ValidatingAdmissionPolicy. Render as for the control plane instead (its binaries live under
 * ~/.cache/chamvi-operator/<version>/bin), as Argo CD renders for its cluster.
 */
export function templateKubeVersion(): string[] {
  return [
    '--kube-version',
    basename(dirname(controlPlaneBin())),
    '--api-versions',
    'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy',
  ];
}

export function helm(args: readonly string[]): Promise<ProcessResult> {
  const withVersion = args[0] === 'template' && !args.includes('--kube-version') ? [...args, ...templateKubeVersion()] : args;
  return runProcess(join(controlPlaneBin(), 'helm'), withVersion, {
    env: {
      ...process.env,
      KUBECONFIG: kubeconfigPath(),
      HELM_CACHE_HOME: '/tmp/chamvi-helm-cache',
      HELM_CONFIG_HOME: '/tmp/chamvi-helm-config',
    },
  });
}
