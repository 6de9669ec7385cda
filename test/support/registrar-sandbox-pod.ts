// What the tests of the kwok exec registrar (sandbox-exec-registrar.ts) give it and read back on
// the real API server: a pod with the label the operator gives its sandbox pods, which is what
// the registrar watches for (nothing else: no operator made it), and the workDir of the Exec
// object the registrar wrote for a pod.
import { kubectl, kubectlOk } from './cluster.ts';

export async function createSandboxPod(namespace: string, name: string): Promise<void> {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/name': 'chamvi-sandbox' } },
    spec: { containers: [{ name: 'sandbox', image: 'chamvi-sandbox:test' }] },
  };
  await kubectlOk(['create', '-f', '-'], { input: JSON.stringify(pod) });
}

/** The workDir the pod's kwok Exec object names, or undefined when it has none. */
export async function execWorkDir(namespace: string, pod: string): Promise<string | undefined> {
  const result = await kubectl(['get', 'execs.kwok.x-k8s.io', pod, '-n', namespace, '-o', 'jsonpath={.spec.execs[0].local.workDir}']);
  return result.code === 0 ? result.stdout.trim() : undefined;
}
