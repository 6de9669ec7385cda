// The local control plane behaves like the clusters the operator will meet: a Ready node,
// PodSecurity `restricted` enforced, RBAC enforced, the scheduler binding pods, the Job
// controller running, and `pods/exec` through the API server reaching a local command in
// the pod's own working directory (kwok).
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, registerPodExec } from '../support/cluster.ts';

const namespace = `control-plane-${process.pid}`;
const tempDirs: string[] = [];

const restrictedContainerSecurity = {
  runAsNonRoot: true,
  runAsUser: 1000,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

function restrictedPod(name: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        { name: 'sandbox', image: 'chamvi/sandbox:dev', command: ['sleep', 'infinity'], securityContext: restrictedContainerSecurity },
      ],
    },
  };
}

/** Registers the pod's Exec with a fresh working directory, creates the pod, waits for Ready. */
async function runningPodWithWorkspace(name: string): Promise<{ workDir: string; home: string }> {
  const workDir = realpathSync(mkdtempSync(join(tmpdir(), `chamvi-${name}-workspace-`)));
  const home = realpathSync(mkdtempSync(join(tmpdir(), `chamvi-${name}-home-`)));
  tempDirs.push(workDir, home);
  await registerPodExec({ namespace, podName: name, workDir, env: { CHAMVI_WORKSPACE: workDir, CHAMVI_HOME: home } });
  const created = await kubectl(['create', '-f', '-'], { input: JSON.stringify(restrictedPod(name)) });
  expect(created.stderr).toBe('');
  expect(created.code).toBe(0);
  const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${name}`, '--timeout=60s']);
  expect(ready.stderr).toBe('');
  return { workDir, home };
}

describe('local control plane', () => {
  let sandbox: { workDir: string; home: string };

  beforeAll(async () => {
    await createNamespace(namespace, { restricted: true });
    sandbox = await runningPodWithWorkspace('sandbox');
  });

  afterAll(async () => {
    await deleteNamespace(namespace);
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });

  it('has a Ready kwok node', async () => {
    const result = await kubectl([
      'get',
      'nodes',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split('\n')).toEqual(['kwok-node-0=True']);
  });

  it('admits a fully restricted pod in a restricted namespace, schedules it on the kwok node, and runs it', async () => {
    const result = await kubectl(['get', 'pod', 'sandbox', '-n', namespace, '-o', 'jsonpath={.spec.nodeName} {.status.phase}']);
    expect(result.stdout).toBe('kwok-node-0 Running');
  });

  it("runs `kubectl exec` as a local command in the pod's own working directory", async () => {
    writeFileSync(join(sandbox.workDir, 'marker.txt'), 'hello\n');
    const pwd = await kubectl(['exec', '-n', namespace, 'sandbox', '--', 'pwd']);
    expect(pwd).toMatchObject({ code: 0, stdout: `${sandbox.workDir}\n` });

    const env = await kubectl(['exec', '-n', namespace, 'sandbox', '--', 'sh', '-c', 'echo $CHAMVI_WORKSPACE; echo $CHAMVI_HOME; ls']);
    expect(env).toMatchObject({ code: 0, stdout: `${sandbox.workDir}\n${sandbox.home}\nmarker.txt\n` });
  });

  it("propagates the exit code of the exec'd command", async () => {
    const result = await kubectl(['exec', '-n', namespace, 'sandbox', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('out\n');
    expect(result.stderr).toContain('err\n');
  });

  it("streams stdin to the exec'd command and closes it at the end", async () => {
    const result = await kubectl(
      ['exec', '-i', '-n', namespace, 'sandbox', '--', 'sh', '-c', 'cat > from-stdin.txt && wc -c < from-stdin.txt'],
      {
        input: 'line one\nline two\n',
        timeoutMs: 30_000,
      },
    );
    expect(result).toMatchObject({ code: 0, stdout: '18\n' });
    expect(readFileSync(join(sandbox.workDir, 'from-stdin.txt'), 'utf8')).toBe('line one\nline two\n');
  });

  it('serves exec over WebSocket to @kubernetes/client-node, the client the operator uses, with the exit code', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath());
    const stdout = new PassThrough();
    let output = '';
    stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const status = await new Promise<V1Status>((resolve, reject) => {
      new Exec(kc).exec(namespace, 'sandbox', 'sandbox', ['sh', '-c', 'pwd; exit 7'], stdout, null, null, false, resolve).catch(reject);
    });
    expect(output).toBe(`${sandbox.workDir}\n`);
    expect(status.status).toBe('Failure');
    expect(status.details?.causes).toContainEqual({ reason: 'ExitCode', message: '7' });
  });

  it("does not leak the test process environment into exec'd commands", async () => {
    const result = await kubectl(['exec', '-n', namespace, 'sandbox', '--', 'sh', '-c', 'env']);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(/^(KUBECONFIG|REDIS_URL)=/m);
  });

  it('gives each pod its own Exec working directory', async () => {
    const other = await runningPodWithWorkspace('sandbox-two');
    expect(other.workDir).not.toBe(sandbox.workDir);
    const pwd = await kubectl(['exec', '-n', namespace, 'sandbox-two', '--', 'pwd']);
    expect(pwd).toMatchObject({ code: 0, stdout: `${other.workDir}\n` });
  });

  it('refuses a privileged pod in the restricted namespace with a PodSecurity message', async () => {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'privileged', namespace },
      spec: { containers: [{ name: 'c', image: 'busybox', securityContext: { privileged: true } }] },
    };
    const result = await kubectl(['create', '-f', '-'], { input: JSON.stringify(pod) });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('violates PodSecurity "restricted:latest"');
    expect(result.stderr).toContain('privileged');
  });

  it('enforces RBAC: a ServiceAccount without roles may not create pods', async () => {
    const result = await kubectl(['auth', 'can-i', 'create', 'pods', '-n', namespace, '--as=system:serviceaccount:default:nobody']);
    expect(result.stdout.trim()).toBe('no');
    expect(result.code).toBe(1);
  });

  it('runs the built-in Job controller: a Job gets a pod that kwok completes', async () => {
    const job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'job-controller-check', namespace },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [{ name: 'c', image: 'busybox', command: ['true'], securityContext: restrictedContainerSecurity }],
          },
        },
      },
    };
    expect((await kubectl(['create', '-f', '-'], { input: JSON.stringify(job) })).code).toBe(0);
    const done = await kubectl(['wait', '-n', namespace, '--for=condition=Complete', 'job/job-controller-check', '--timeout=60s']);
    expect(done).toMatchObject({ code: 0 });
  });
});
