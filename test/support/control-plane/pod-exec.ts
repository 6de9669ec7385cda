// Per-pod exec wiring for kwok: an Exec object (kwok.x-k8s.io/v1alpha1) named like the pod
// makes `pods/exec` on that pod run a LOCAL command on this machine, in `workDir`, with
// `env` added to kwok's (deliberately small) environment. kwok watches these objects in
// the API server, so a test can register one for each pod at run time.
import { binDir as defaultBinDir } from './binaries.ts';
import { runKubectl, kubectlOrThrow, type KubectlResult } from './run-kubectl.ts';

export interface PodExecOptions {
  namespace: string;
  podName: string;
  /** Working directory of every exec'd command; must exist on this machine. */
  workDir: string;
  /** Extra environment, e.g. CHAMVI_WORKSPACE and CHAMVI_HOME. */
  env?: Record<string, string>;
  /** Restrict to these container names; default all containers of the pod. */
  containers?: string[];
  /** Run exec'd commands as this uid/gid (kwok must run as root to switch). */
  runAsUser?: number;
  runAsGroup?: number;
}

export function podExecManifest(options: PodExecOptions): object {
  const securityContext =
    options.runAsUser === undefined && options.runAsGroup === undefined
      ? undefined
      : {
          ...(options.runAsUser === undefined ? {} : { runAsUser: options.runAsUser }),
          ...(options.runAsGroup === undefined ? {} : { runAsGroup: options.runAsGroup }),
        };
  return {
    apiVersion: 'kwok.x-k8s.io/v1alpha1',
    kind: 'Exec',
    // kwok matches an Exec to a pod by namespace and name.
    metadata: { name: options.podName, namespace: options.namespace },
    spec: {
      execs: [
        {
          ...(options.containers ? { containers: options.containers } : {}),
          local: {
            workDir: options.workDir,
            envs: Object.entries(options.env ?? {}).map(([name, value]) => ({ name, value })),
            ...(securityContext ? { securityContext } : {}),
          },
        },
      ],
    },
  };
}

/**
 * Creates or replaces the pod's Exec object. kwok sees it through a watch within
 * milliseconds; register it before (or right after) creating the pod.
 */
export async function registerPodExec(kubeconfig: string, options: PodExecOptions, binDir = defaultBinDir()): Promise<void> {
  await kubectlOrThrow(['apply', '-f', '-'], { binDir, kubeconfig, input: JSON.stringify(podExecManifest(options)) });
}

export function unregisterPodExec(
  kubeconfig: string,
  target: { namespace: string; podName: string },
  binDir = defaultBinDir(),
): Promise<KubectlResult> {
  return runKubectl(['delete', 'exec.kwok.x-k8s.io', target.podName, '-n', target.namespace, '--ignore-not-found'], {
    binDir,
    kubeconfig,
  });
}
