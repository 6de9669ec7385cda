// Helpers for tests that run against the local control plane started by
// control-plane/global-setup.ts: the real kubectl with the test kubeconfig, namespaces
// (optionally PodSecurity-restricted), and per-pod kwok exec wiring.
import { inject } from 'vitest';
import { stringify } from 'yaml';
import { registerPodExec as registerExec, type PodExecOptions } from './control-plane/pod-exec.ts';
import { runKubectl, type KubectlResult } from './control-plane/run-kubectl.ts';

export type { KubectlResult } from './control-plane/run-kubectl.ts';
export type { PodExecOptions } from './control-plane/pod-exec.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin kubeconfig of the test control plane (system:masters: bypasses RBAC). */
    kubeconfig: string;
    /** redis://127.0.0.1:<port>, no persistence. */
    redisUrl: string;
    /** Cache dir holding kubectl, helm, kwok and the control-plane binaries. */
    controlPlaneBin: string;
    /** State dir with logs/<process>.log, for debugging a failing test. */
    controlPlaneStateDir: string;
  }
}

export function kubeconfigPath(): string {
  return inject('kubeconfig');
}

export function redisUrl(): string {
  return inject('redisUrl');
}

export function controlPlaneBin(): string {
  return inject('controlPlaneBin');
}

/** Runs the real kubectl against the test control plane; never throws on a non-zero exit. */
export function kubectl(args: readonly string[], options: { input?: string; timeoutMs?: number } = {}): Promise<KubectlResult> {
  return runKubectl(args, { binDir: controlPlaneBin(), kubeconfig: kubeconfigPath(), ...options });
}

/** kubectl that throws with its stderr when it fails; resolves to its stdout. */
export async function kubectlOk(args: readonly string[], options: { input?: string } = {}): Promise<string> {
  const result = await kubectl(args, options);
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (exit ${result.code}): ${result.stderr.trim()}`);
  return result.stdout;
}

/** `kubectl ... -o json`, parsed; throws with kubectl's stderr when it fails. */
export async function kubectlJson<T>(args: readonly string[]): Promise<T> {
  return JSON.parse(await kubectlOk([...args, '-o', 'json'])) as T;
}

/** `kubectl create` of the objects, as one YAML stream; throws with kubectl's stderr when it fails. */
export async function kubectlCreate(...objects: object[]): Promise<void> {
  await kubectlOk(['create', '-f', '-'], { input: objects.map((object) => stringify(object)).join('---\n') });
}

/**
 * Creates a namespace and waits for its default ServiceAccount: until
 * kube-controller-manager has made it, ServiceAccount admission refuses every pod.
 * `restricted` labels it `pod-security.kubernetes.io/enforce=restricted`.
 */
export async function createNamespace(name: string, options: { restricted?: boolean } = {}): Promise<void> {
  const labels: Record<string, string> = options.restricted
    ? { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' }
    : {};
  await kubectlOk(['create', '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } }),
  });
  const deadline = Date.now() + 30_000;
  while ((await kubectl(['get', 'serviceaccount', 'default', '-n', name, '-o', 'name'])).code !== 0) {
    if (Date.now() > deadline) throw new Error(`namespace ${name}: no default ServiceAccount after 30s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Deletes a namespace without waiting for its finalizers. */
export async function deleteNamespace(name: string): Promise<void> {
  await kubectl(['delete', 'namespace', name, '--wait=false', '--ignore-not-found']);
}

/** Makes `pods/exec` on this pod run local commands in `workDir` with `env` (kwok Exec). */
export function registerPodExec(options: PodExecOptions): Promise<void> {
  return registerExec(kubeconfigPath(), options, controlPlaneBin());
}
