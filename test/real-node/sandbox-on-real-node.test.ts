// The operator's own sandbox pod and deny-all NetworkPolicy (reconcile/sandbox-pod.ts), from
// the sandbox image built here, on a real kubelet + containerd + runc node with kube-router
// enforcing NetworkPolicy: what SECURITY.md promises about the pod, seen from inside the
// container through exec (API server -> kubelet -> CRI streaming), and the policy proven by a
// control case where the same connection succeeds without it.
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createNamespace, deleteNamespace, kubectl, kubectlOk } from '../support/cluster.ts';
import { connectFrom, neighboursOf, until } from '../support/real-node/egress-probes.ts';
import { realNodeBridgeAddress, realNodeBridgeMac } from '../support/real-node/real-node.ts';
import { realNodeSandboxPod } from '../support/real-node/sandbox-pods.ts';
import { sandboxDenyAllPolicy } from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { RUN_UID_LABEL } from '../../operator/src/api/index.ts';

const unavailable = inject('realNodeUnavailable');
const namespace = `real-node-${process.pid}`;

async function waitForPodReady(name: string): Promise<void> {
  const result = await kubectl(['wait', '-n', namespace, `pod/${name}`, '--for=condition=Ready', '--timeout=120s'], { timeoutMs: 130_000 });
  if (result.code !== 0) {
    const describe = await kubectl(['describe', 'pod', '-n', namespace, name]);
    throw new Error(`pod ${name} not Ready: ${result.stderr}\n${describe.stdout}`);
  }
}

/** kubectl exec through the API server and the real kubelet; never throws. */
function exec(pod: string, command: string[], input?: string) {
  return kubectl(['exec', ...(input === undefined ? [] : ['-i']), '-n', namespace, pod, '-c', 'sandbox', '--', ...command], {
    ...(input === undefined ? {} : { input }),
    timeoutMs: 30_000,
  });
}

describe.skipIf(unavailable !== '')(`the sandbox on a real node${unavailable ? ` (SKIPPED: ${unavailable})` : ''}`, () => {
  const image = inject('realNodeSandboxImage');
  const sandbox = realNodeSandboxPod(namespace, 'probe', '00000000-0000-4000-8000-00000000a001', image);
  const sandboxName = sandbox.metadata!.name!;
  /** One TCP connection attempt from inside the sandbox (egress-probes.ts): 'connected', an error code, or 'timeout'. */
  const connectFromSandbox = (host: string, port: number) => connectFrom({ namespace, name: sandboxName }, host, port);
  /** Polls until the outcome is wanted (the enforcer applies a policy within seconds). */
  const eventually = (host: string, port: number, want: (outcome: string) => boolean) => until(() => connectFromSandbox(host, port), want);
  const policy = sandboxDenyAllPolicy(namespace);
  // Another pod on the node, listening: the "other pod" a sandbox must not reach. Not a
  // sandbox (no run uid label), so the deny-all fences in only the sandbox's side.
  const listener = realNodeSandboxPod(namespace, 'listener', '00000000-0000-4000-8000-00000000a002', image);
  delete listener.metadata!.labels![RUN_UID_LABEL];
  listener.spec!.containers[0]!.args = ['node', '-e', "require('net').createServer(s=>s.end('hi')).listen(8080)"];
  let hostListener: Server;
  let hostPort = 0;
  let listenerIp = '';

  beforeAll(async () => {
    await createNamespace(namespace, { restricted: true });
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(sandbox) });
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(listener) });
    await waitForPodReady(sandboxName);
    await waitForPodReady(listener.metadata!.name!);
    listenerIp = (await kubectlOk(['get', 'pod', '-n', namespace, listener.metadata!.name!, '-o', 'jsonpath={.status.podIP}'])).trim();
    // A listener on the host's bridge address: what a sandbox would reach of the node itself.
    hostListener = createServer((socket) => {
      // The probe closes at once; a reset is expected, not an error of the test.
      socket.on('error', () => {});
      socket.end('host');
    });
    await new Promise<void>((resolve, reject) => {
      hostListener.once('error', reject);
      hostListener.listen(0, inject('realNodeBridgeIp'), () => resolve());
    });
    hostPort = (hostListener.address() as { port: number }).port;
  }, 300_000);

  afterAll(async () => {
    hostListener?.close();
    await deleteNamespace(namespace);
  });

  it('lands on the real node, admitted by PodSecurity restricted', async () => {
    const node = await kubectlOk(['get', 'pod', '-n', namespace, sandboxName, '-o', 'jsonpath={.spec.nodeName}']);
    expect(node).toBe(inject('realNodeName'));
  });

  it('runs the tools as uid 1000 under seccomp, with a read-only root, writable workspace and home, and no token', async () => {
    const id = await exec(sandboxName, ['id', '-u']);
    expect(id).toMatchObject({ code: 0, stdout: '1000\n' });
    const seccomp = await exec(sandboxName, ['grep', '^Seccomp:', '/proc/self/status']);
    expect(seccomp.stdout).toMatch(/^Seccomp:\s+2$/m);
    const rootWrite = await exec(sandboxName, ['touch', '/usr/chamvi-probe']);
    expect(rootWrite.code).not.toBe(0);
    expect(rootWrite.stderr).toMatch(/Read-only file system/);
    const workspace = await exec(sandboxName, [
      'sh',
      '-c',
      'echo ok > /workspace/f && cat /workspace/f && echo ok > "$HOME/f" && cat "$HOME/f"',
    ]);
    expect(workspace).toMatchObject({ code: 0, stdout: 'ok\nok\n' });
    const token = await exec(sandboxName, ['ls', '/var/run/secrets/kubernetes.io/serviceaccount']);
    expect(token.code).not.toBe(0);
  });

  it('passes stdin through exec and propagates the exit code', async () => {
    const result = await exec(sandboxName, ['sh', '-c', 'cat; exit 3'], 'from stdin');
    expect(result.stdout).toBe('from stdin');
    expect(result.code).toBe(3);
  });

  it("starts the toolbox from the image's compile cache, as uid 1000 on the read-only root", async () => {
    // Node says what it did with the cache (NODE_DEBUG_NATIVE): it takes the code the image's
    // build compiled for the bundle, and has nothing to write back.
    const started = await exec(sandboxName, ['env', 'NODE_DEBUG_NATIVE=COMPILE_CACHE', 'node', '/opt/chamvi/toolbox.mjs', 'serve'], '');
    expect(started.code, started.stderr).toBe(0);
    expect(started.stderr).toMatch(/V8 code cache for ESM file:\/\/\/opt\/chamvi\/toolbox\.mjs was accepted/);
    expect(started.stderr).toMatch(/skip persisting ESM file:\/\/\/opt\/chamvi\/toolbox\.mjs because cache was the same/);
  });

  it('OOM-kills a command that allocates past the memory limit, and the sandbox lives on', async () => {
    // 256Mi limit (realNodeSandboxResources); 400 MB touched page by page. Bounded even if no limit held.
    const hog = await exec(sandboxName, ['node', '-e', 'const b=Buffer.alloc(400*1024*1024,1);console.log(b.length)']);
    expect(hog.code).toBe(137);
    expect(hog.stdout).toBe('');
    expect(await exec(sandboxName, ['true'])).toMatchObject({ code: 0 });
  });

  it("stops a process flood at the node's PID limit, and the sandbox lives on", async () => {
    // 700 sleepers against the kubelet's podPidsLimit of 512 (real-node.ts): bounded even if no limit held.
    const flood = await exec(sandboxName, [
      'node',
      '-e',
      "const {spawn}=require('child_process');let ok=0,failed=0,code='';" +
        "for(let i=0;i<700;i++){const c=spawn('sleep',['5'],{stdio:'ignore'});c.on('error',e=>{failed++;code=e.code});if(c.pid)ok++}" +
        'setTimeout(()=>{console.log(JSON.stringify({ok,failed,code}));process.exit(0)},1000)',
    ]);
    const { ok: started, failed, code } = JSON.parse(flood.stdout || '{}') as { ok: number; failed: number; code: string };
    expect(code).toBe('EAGAIN');
    expect(failed).toBeGreaterThan(0);
    expect(started).toBeLessThan(512);
    expect(started).toBeGreaterThan(50);
    expect(await exec(sandboxName, ['true'])).toMatchObject({ code: 0 });
  });

  it("enforces the namespace's sandbox deny-all NetworkPolicy: without it the host and another pod answer, with it neither does", async () => {
    const bridgeIp = inject('realNodeBridgeIp');
    // Control case: no policy yet, both connections succeed (so the refusal below means the policy).
    expect(await eventually(bridgeIp, hostPort, (o) => o === 'connected')).toBe('connected');
    expect(await eventually(listenerIp, 8080, (o) => o === 'connected')).toBe('connected');

    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(policy) });
    expect(await eventually(bridgeIp, hostPort, (o) => o !== 'connected')).not.toBe('connected');
    expect(await connectFromSandbox(listenerIp, 8080)).not.toBe('connected');

    // And the policy, not something else, was what blocked it.
    await kubectlOk(['delete', 'networkpolicy', '-n', namespace, policy.metadata!.name!]);
    expect(await eventually(bridgeIp, hostPort, (o) => o === 'connected')).toBe('connected');
  });

  it("keeps the bridge's hardware address as pods go, so the sandbox reaches the host at once", async () => {
    // A bridge without an address of its own follows its lowest port's and changes when that
    // pod goes; the others' ARP entries for the gateway then go unanswered for up to a minute.
    await kubectlOk(['delete', 'pod', '-n', namespace, listener.metadata!.name!, '--wait=true', '--timeout=60s']);
    // 3: NET_ADDR_SET, an address given to the device, which the kernel then never replaces.
    expect(realNodeBridgeAddress()).toEqual({ address: realNodeBridgeMac, assignType: '3' });
    const bridgeIp = inject('realNodeBridgeIp');
    expect(await connectFromSandbox(bridgeIp, hostPort)).toBe('connected');
    // The sandbox's ARP entry for the gateway (IP, type, flags, hardware address, ...) names it.
    const gateway = (await neighboursOf({ namespace, name: sandboxName })).split('; ').find((line) => line.startsWith(`${bridgeIp} `));
    expect(gateway?.split(/\s+/)[3]).toBe(realNodeBridgeMac);
  });
});
