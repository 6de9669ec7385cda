// The Kubernetes exec Sandbox against the real API server and kwok: the shared contract for
// both modes (one exec per call, a kept serve session), then what only exec has: exit codes
// from the status channel, a session that drops, a hung exec, a connection that never opens
// or silently dies. Each sandbox is a fully restricted pod in a PodSecurity-restricted
// namespace; the registrar wires its exec to a temporary workspace running the local toolbox.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubernetesExecTransport, type KubernetesExecTransportOptions } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { createKubernetesSandbox } from '../../operator/src/sandbox/kubernetes-sandbox.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl } from '../support/cluster.ts';
import { describeSandboxContract } from '../support/sandbox-contract.ts';
import { SANDBOX_POD_SELECTOR, startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const namespace = `exec-sandbox-${process.pid}`;
const container = 'sandbox';
// kwok runs the exec'd command on this machine, so the toolbox is the locally built bundle.
const toolboxCommand = [process.execPath, DEFAULT_TOOLBOX_PATH];
const testLabel = { 'chamvi.dev/test': namespace };

let registrar: SandboxExecRegistrar;
let rootDir: string;
let kubeConfig: KubeConfig;
let podCount = 0;

function restrictedPod(name: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/name': 'chamvi-sandbox', ...testLabel } },
    spec: {
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: container,
          image: 'chamvi/sandbox:dev',
          command: ['sleep', 'infinity'],
          securityContext: {
            runAsNonRoot: true,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
        },
      ],
    },
  };
}

/** Creates a sandbox pod, waits until it is Ready and its exec is wired to a workspace. */
async function readyPod(prefix: string): Promise<string> {
  const name = `${prefix}-${(podCount += 1)}`;
  const created = await kubectl(['create', '-f', '-'], { input: JSON.stringify(restrictedPod(name)) });
  expect(created.stderr).toBe('');
  const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${name}`, '--timeout=60s']);
  expect(ready.code).toBe(0);
  await registrar.waitForWorkspace(namespace, name);
  return name;
}

async function deletePod(name: string): Promise<void> {
  await kubectl(['delete', 'pod', name, '-n', namespace, '--wait=false', '--ignore-not-found', '--grace-period=0', '--force']);
}

function transportFor(podName: string, overrides: Partial<KubernetesExecTransportOptions> = {}): KubernetesExecTransport {
  return new KubernetesExecTransport({ kubeConfig, namespace, podName, container, toolboxCommand, ...overrides });
}

/** Wraps a real transport to hand the test every process it started. */
function recording(transport: ToolboxTransport): { transport: ToolboxTransport; started: ToolboxProcess[] } {
  const started: ToolboxProcess[] = [];
  return {
    started,
    transport: {
      start: async (args) => {
        const process = await transport.start(args);
        started.push(process);
        return process;
      },
    },
  };
}

/** A TCP relay to the API server that can go silent, as a dead network path does. */
async function startRelay(target: URL): Promise<{ url: string; freeze(): void; close(): void }> {
  const sockets = new Set<net.Socket>();
  let frozen = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('data', (chunk) => frozen || upstream.write(chunk));
    upstream.on('data', (chunk) => frozen || client.write(chunk));
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    freeze: () => (frozen = true),
    close: () => {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

function kubeConfigWithServer(server: string): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kubeConfig.clusters.map((cluster) => ({ ...cluster, server })),
    users: kubeConfig.users,
    contexts: kubeConfig.contexts,
    currentContext: kubeConfig.currentContext,
  });
  return copy;
}

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  await createNamespace(namespace, { restricted: true });
  rootDir = mkdtempSync(path.join(tmpdir(), 'chamvi-exec-sandbox-'));
  registrar = await startSandboxExecRegistrar({
    kubeconfig: kubeconfigPath(),
    rootDir,
    labelSelector: `${SANDBOX_POD_SELECTOR},chamvi.dev/test=${namespace}`,
  });
});

afterAll(async () => {
  await registrar?.stop();
  await deleteNamespace(namespace);
  if (rootDir) rmSync(rootDir, { recursive: true, force: true });
});

for (const mode of ['call', 'serve'] as const) {
  describeSandboxContract(`Kubernetes exec (${mode})`, async (options) => {
    const podName = await readyPod(`contract-${mode}`);
    const sandbox = createKubernetesSandbox({
      kubeConfig,
      namespace,
      podName,
      container,
      toolboxCommand,
      mode,
      // Well under vitest's test timeout, so a stuck exec fails as a TIMEOUT that names itself.
      defaultTimeoutMs: 60_000,
      ...(options?.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
    });
    return { sandbox, cleanup: () => deletePod(podName) };
  });
}

describe('Kubernetes exec sandbox', () => {
  let podName: string;

  beforeAll(async () => {
    podName = await readyPod('exec');
  });

  it('admits the sandbox pod in the restricted namespace and gives it its own workspace', async () => {
    const result = await kubectl(['get', 'pod', podName, '-n', namespace, '-o', 'jsonpath={.status.phase}']);
    expect(result.stdout).toBe('Running');
    const workspace = registrar.workspaceOf(namespace, podName);
    const pwd = await kubectl(['exec', '-n', namespace, podName, '--', 'sh', '-c', 'pwd; echo "$CHAMVI_HOME"']);
    expect(pwd.stdout).toBe(`${workspace?.workspaceDir}\n${workspace?.homeDir}\n`);
  });

  it('reports the exit code from the status channel, with stdout, stderr and stdin delivered', async () => {
    const process = await transportFor(podName, { toolboxCommand: ['sh', '-c'] }).start([
      'read line; echo "got $line"; echo oops >&2; cat; exit 7',
    ]);
    let stdout = '';
    let stderr = '';
    process.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    process.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // Ending stdin must reach the command as EOF (v5 close frame), or `cat` would never return.
    process.stdin.end('first\nrest\n');
    expect(await process.exited).toEqual({ code: 7, signal: null });
    expect(stdout).toBe('got first\nrest\n');
    expect(stderr).toBe('oops\n');
  });

  it('fails a call whose toolbox exits non-zero with a SandboxError naming the exit code and its stderr', async () => {
    const sandbox = new ToolboxSandbox(transportFor(podName, { toolboxCommand: [...toolboxCommand, '--no-such-flag'] }), { mode: 'call' });
    const failure = await sandbox.call({ tool: 'list_files', input: {} }).catch((error: unknown) => error);
    expect(SandboxError.isInstance(failure) && failure.reason).toBe('TRANSPORT');
    expect((failure as Error).message).toMatch(/exited \(2\) without an answer: toolbox: unknown argument --no-such-flag/);
  });

  it('explains an exec that fails without an exit code (the command cannot start)', async () => {
    const sandbox = new ToolboxSandbox(transportFor(podName, { toolboxCommand: ['/nonexistent/node'] }), { mode: 'call' });
    const failure = await sandbox.call({ tool: 'list_files', input: {} }).catch((error: unknown) => error);
    expect(SandboxError.isInstance(failure) && failure.reason).toBe('TRANSPORT');
    expect((failure as Error).message).toMatch(/nonexistent/);
  });

  it('starts a new serve session on the next call when the kept one drops', async () => {
    const recorded = recording(transportFor(podName));
    const sandbox = new ToolboxSandbox(recorded.transport, { mode: 'serve' });
    try {
      const first = await sandbox.call({ tool: 'bash', input: { command: 'echo $PPID' } });
      const firstPid = Number((first.ok && (first.result as { stdout: string }).stdout) || Number.NaN);
      expect(Number.isSafeInteger(firstPid)).toBe(true);
      // The session's toolbox is a process on this machine (kwok): kill it from outside.
      globalThis.process.kill(firstPid, 'SIGKILL');
      expect((await recorded.started[0]?.exited)?.code).not.toBe(0);
      const next = await sandbox.call({ tool: 'bash', input: { command: 'echo $PPID' } });
      const nextPid = Number((next.ok && (next.result as { stdout: string }).stdout) || Number.NaN);
      expect(Number.isSafeInteger(nextPid) && nextPid !== firstPid).toBe(true);
      expect(recorded.started).toHaveLength(2);
    } finally {
      await sandbox.close();
    }
  });

  it('times out a hung exec and closes its stream', async () => {
    // A "toolbox" that never answers and ignores stdin.
    for (const mode of ['call', 'serve'] as const) {
      const recorded = recording(transportFor(podName, { toolboxCommand: ['sh', '-c', 'sleep 30', 'hung-toolbox'] }));
      const sandbox = new ToolboxSandbox(recorded.transport, { mode });
      const started = Date.now();
      const failure = await sandbox.call({ tool: 'list_files', input: {} }, { timeoutMs: 500 }).catch((error: unknown) => error);
      expect(SandboxError.isInstance(failure) && failure.reason).toBe('TIMEOUT');
      expect(Date.now() - started).toBeLessThan(3_000);
      await sandbox.close();
      // kill() closes the exec stream: the process counts as ended, not left open.
      expect(await recorded.started[0]?.exited).toMatchObject({ code: null });
    }
  });

  it('gives up connecting to an API server that never answers, within the connect timeout', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as net.AddressInfo;
    try {
      const transport = transportFor(podName, { kubeConfig: kubeConfigWithServer(`https://127.0.0.1:${port}`), connectTimeoutMs: 300 });
      const started = Date.now();
      const failure = await transport.start(['call']).catch((error: unknown) => error);
      expect(SandboxError.isInstance(failure) && failure.reason).toBe('TIMEOUT');
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      silent.close();
    }
  });

  it('notices a kept session whose connection went silent (keep-alive ping) and reconnects', async () => {
    const relay = await startRelay(new URL(kubeConfig.getCurrentCluster()?.server ?? ''));
    try {
      const viaRelay = recording(transportFor(podName, { kubeConfig: kubeConfigWithServer(relay.url), keepAliveIntervalMs: 200 }));
      let useRelay = true;
      const direct = transportFor(podName);
      const sandbox = new ToolboxSandbox(
        { start: (args) => (useRelay ? viaRelay.transport.start(args) : direct.start(args)) },
        { mode: 'serve' },
      );
      expect((await sandbox.call({ tool: 'list_files', input: {} })).ok).toBe(true);
      relay.freeze();
      useRelay = false;
      const dropped = await viaRelay.started[0]?.exited;
      expect(dropped?.code).toBeNull();
      expect((await sandbox.call({ tool: 'list_files', input: {} })).ok).toBe(true);
      await sandbox.close();
    } finally {
      relay.close();
    }
  });

  it('the registrar removes the workspace and the Exec when the pod goes', async () => {
    const name = await readyPod('registrar');
    const workspace = registrar.workspaceOf(namespace, name);
    expect(workspace).toBeDefined();
    await deletePod(name);
    const deadline = Date.now() + 15_000;
    while (registrar.workspaceOf(namespace, name) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(registrar.workspaceOf(namespace, name)).toBeUndefined();
    const exec = await kubectl(['get', 'execs.kwok.x-k8s.io', name, '-n', namespace, '--ignore-not-found', '-o', 'name']);
    for (let attempt = 0; attempt < 50 && exec.stdout !== ''; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      exec.stdout = (await kubectl(['get', 'execs.kwok.x-k8s.io', name, '-n', namespace, '--ignore-not-found', '-o', 'name'])).stdout;
    }
    expect(exec.stdout).toBe('');
  });
});
