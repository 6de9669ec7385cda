// What a sandbox's own programs do on the network, asked from inside a sandbox pod on the real
// node through `kubectl exec` (API server -> kubelet -> CRI): a bare TCP connection, a plain
// http.get that Node sends through the proxy only because the pod's environment says so
// (HTTP_PROXY with the run's credential, NODE_USE_ENV_PROXY), and a CONNECT to the proxy with
// that credential, as an https client would open a tunnel. Each answers with a short outcome
// string, never throws: the tests compare outcomes.
import { kubectl } from '../cluster.ts';

/** The sandbox container's name (reconcile/sandbox-pod.ts SANDBOX_CONTAINER). */
const CONTAINER = 'sandbox';

export interface SandboxPod {
  namespace: string;
  name: string;
}

async function nodeIn(pod: SandboxPod, script: string): Promise<string> {
  const result = await kubectl(['exec', '-n', pod.namespace, pod.name, '-c', CONTAINER, '--', 'node', '-e', script], { timeoutMs: 30_000 });
  return result.code === 0 ? result.stdout.trim() : `exec failed: ${result.stderr.trim()}`;
}

/** One TCP connection attempt: 'connected', an error code (ECONNREFUSED, EHOSTUNREACH), or 'timeout'. */
export function connectFrom(pod: SandboxPod, host: string, port: number): Promise<string> {
  return nodeIn(
    pod,
    `const s=require('net').connect(${port},${JSON.stringify(host)});` +
      "s.on('connect',()=>{console.log('connected');process.exit(0)});" +
      "s.on('error',e=>{console.log(e.code);process.exit(0)});" +
      "setTimeout(()=>{console.log('timeout');process.exit(0)},2000)",
  );
}

/** The pod's ARP table (/proc/net/arp), one line per neighbour: which hardware address it holds for the gateway. */
export async function neighboursOf(pod: SandboxPod): Promise<string> {
  const table = await nodeIn(pod, "process.stdout.write(require('fs').readFileSync('/proc/net/arp','utf8'))");
  return table.split('\n').slice(1).join('; ');
}

/** A plain GET by a program that knows nothing of proxies: "status body", "error CODE" or 'timeout'. */
export function getFrom(pod: SandboxPod, url: string): Promise<string> {
  return nodeIn(
    pod,
    `require('http').get(${JSON.stringify(url)},` +
      "res=>{let b='';res.on('data',d=>b+=d);res.on('end',()=>{console.log(res.statusCode+' '+b.trim());process.exit(0)})})" +
      ".on('error',e=>{console.log('error '+e.code);process.exit(0)});" +
      "setTimeout(()=>{console.log('timeout');process.exit(0)},5000)",
  );
}

/**
 * CONNECT `authority` (host:port) through the proxy named by the pod's HTTPS_PROXY, with the
 * credential in it: "STATUS RULE" (the x-chamvi-egress-rule header, empty when allowed),
 * "error CODE" or 'timeout'.
 */
export function connectThroughProxy(pod: SandboxPod, authority: string): Promise<string> {
  return nodeIn(
    pod,
    `const a=${JSON.stringify(authority)};const u=new URL(process.env.HTTPS_PROXY);` +
      "const auth=Buffer.from(decodeURIComponent(u.username)+':'+decodeURIComponent(u.password)).toString('base64');" +
      "const s=require('net').connect(Number(u.port),u.hostname);" +
      "s.on('connect',()=>s.write('CONNECT '+a+' HTTP/1.1\\r\\nHost: '+a+'\\r\\nProxy-Authorization: Basic '+auth+'\\r\\n\\r\\n'));" +
      "let b='';s.on('data',d=>{b+=d;if(!b.includes('\\r\\n\\r\\n'))return;const r=/x-chamvi-egress-rule: *(\\S+)/i.exec(b);" +
      "console.log(b.split(' ')[1]+' '+(r?r[1]:''));process.exit(0)});" +
      "s.on('error',e=>{console.log('error '+e.code);process.exit(0)});" +
      "setTimeout(()=>{console.log('timeout');process.exit(0)},5000)",
  );
}

/** Asks `probe` until its outcome is wanted or 20 s pass (an enforcer applies a policy within seconds); the last outcome. */
export async function until(probe: () => Promise<string>, want: (outcome: string) => boolean): Promise<string> {
  const deadline = Date.now() + 20_000;
  let outcome = '';
  do {
    outcome = await probe();
    if (want(outcome)) return outcome;
  } while (Date.now() < deadline);
  return outcome;
}
