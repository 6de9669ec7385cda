// Benchmark of the egress proxy (`make bench-egress`), each figure against a direct connection
// in the same run: a 100 MB download (through a CONNECT tunnel, and forwarded as plain HTTP),
// the latency of 1 000 small sequential requests on kept connections, and the proxy's memory
// with 100 tunnels open at once. The upstream is a loopback HTTP server; the proxy is its own
// process (egress-proxy-harness.ts). Writes test/bench/results/egress.json and prints a table.
// Goals (issue #12): at least 90 % of direct throughput, under 1 ms added p50 per request.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingMessage, type RequestOptions } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';

const resultsFile = fileURLToPath(new URL('./results/egress.json', import.meta.url));
const harness = fileURLToPath(new URL('./egress-proxy-harness.ts', import.meta.url));
const KEY = 'bench-egress-key-0123456789abcdef0123456789abcdef';
const UID = '11111111-1111-4111-8111-111111111111';
const AUTH = `Basic ${Buffer.from(`${UID}:${proxyToken(KEY, UID)}`).toString('base64')}`;
const DOWNLOAD_BYTES = 100 * 1024 * 1024;
const REQUESTS = 1000;
const TUNNELS = 100;
const ROUNDS = 3;

const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
const median = (samples: number[]) => percentile(samples, 50);

// ---- the upstream: a 100 MB body from one 1 MiB buffer, and a small answer ----------------
const chunk = Buffer.alloc(1024 * 1024, 'x');
const upstream = createServer((req, res) => {
  if (req.url === '/big') {
    res.writeHead(200, { 'content-length': DOWNLOAD_BYTES });
    let left = DOWNLOAD_BYTES / chunk.length;
    const write = () => {
      while (left > 0) {
        left--;
        if (!res.write(chunk)) return void res.once('drain', write);
      }
      res.end();
    };
    write();
    return;
  }
  res.writeHead(200, { 'content-length': 2 }).end('ok');
});
upstream.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamPort = (upstream.address() as AddressInfo).port;

// ---- the proxy --------------------------------------------------------------------------
const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', harness, KEY, UID, `upstream.test:${upstreamPort}`], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
const proxyPort = await new Promise<number>((resolve) => {
  child.stdout.once('data', (data: Buffer) => resolve((JSON.parse(data.toString()) as { port: number }).port));
});
interface ProxyMemory {
  rss: number;
  heapUsed: number;
  external: number;
}
/** The proxy's memory after a full collection (it answers a line on stdin). */
function proxyMemory(): Promise<ProxyMemory> {
  return new Promise((resolve) => {
    child.stdout.once('data', (data: Buffer) => resolve(JSON.parse(data.toString()) as ProxyMemory));
    child.stdin.write('\n');
  });
}

/** A CONNECT tunnel to the upstream through the proxy. */
function tunnel(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1');
    socket.once('error', reject);
    socket.write(`CONNECT upstream.test:${upstreamPort} HTTP/1.1\r\nHost: upstream.test\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    socket.once('data', (data: Buffer) => {
      if (!data.toString().startsWith('HTTP/1.1 200')) reject(new Error(data.toString()));
      else resolve(socket);
    });
  });
}

function timeGet(options: RequestOptions): Promise<{ ms: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(options, (res: IncomingMessage) => {
      let bytes = 0;
      res.on('data', (data: Buffer) => (bytes += data.length));
      res.on('end', () => resolve({ ms: performance.now() - started, bytes }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** An agent whose one connection is a tunnel through the proxy (HTTP over CONNECT, as for https). */
function tunnelAgent(socket: Socket): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  (agent as unknown as { createConnection: () => Socket }).createConnection = () => socket;
  return agent;
}

const direct = new Agent({ keepAlive: true, maxSockets: 1 });
const viaProxy = new Agent({ keepAlive: true, maxSockets: 1 });
const directGet = (path: string) => timeGet({ host: '127.0.0.1', port: upstreamPort, path, agent: direct });
const forwardGet = (path: string) =>
  timeGet({
    host: '127.0.0.1',
    port: proxyPort,
    path: `http://upstream.test:${upstreamPort}${path}`,
    agent: viaProxy,
    headers: { 'proxy-authorization': AUTH },
  });

// ---- memory at 100 concurrent tunnels (first, so no earlier phase's connections count) ----
const idle = await proxyMemory();
const open = await Promise.all(Array.from({ length: TUNNELS }, () => tunnel()));
// Each tunnel carries one request, so every one has moved data both ways.
await Promise.all(open.map((socket) => timeGet({ host: 'upstream.test', path: '/small', agent: tunnelAgent(socket) })));
await new Promise((resolve) => setTimeout(resolve, 500));
const loaded = await proxyMemory();
for (const socket of open) socket.destroy();

// ---- throughput -------------------------------------------------------------------------
const mbps = (result: { ms: number; bytes: number }) => {
  if (result.bytes !== DOWNLOAD_BYTES) throw new Error(`got ${result.bytes} bytes`);
  return DOWNLOAD_BYTES / 1024 / 1024 / (result.ms / 1000);
};
const throughput = { direct: [] as number[], tunnel: [] as number[], forward: [] as number[] };
for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex++) {
  throughput.direct.push(mbps(await directGet('/big')));
  const socket = await tunnel();
  throughput.tunnel.push(mbps(await timeGet({ host: 'upstream.test', path: '/big', agent: tunnelAgent(socket) })));
  socket.destroy();
  throughput.forward.push(mbps(await forwardGet('/big')));
}

// ---- latency ----------------------------------------------------------------------------
async function latency(get: () => Promise<{ ms: number }>): Promise<{ p50: number; p99: number; n: number }> {
  for (let index = 0; index < 50; index++) await get();
  const samples: number[] = [];
  for (let index = 0; index < REQUESTS; index++) samples.push((await get()).ms);
  return { p50: round(percentile(samples, 50)), p99: round(percentile(samples, 99)), n: REQUESTS };
}
const latencyDirect = await latency(() => directGet('/small'));
const latencySocket = await tunnel();
const latencyTunnelAgent = tunnelAgent(latencySocket);
const latencyTunnel = await latency(() => timeGet({ host: 'upstream.test', path: '/small', agent: latencyTunnelAgent }));
latencySocket.destroy();
const latencyForward = await latency(() => forwardGet('/small'));
// A new tunnel per request: what a client that keeps nothing pays (the proxy's decision, the upstream connect).
const latencyNewTunnel = await latency(async () => {
  const started = performance.now();
  const socket = await tunnel();
  socket.destroy();
  return { ms: performance.now() - started };
});

child.kill('SIGTERM');
upstream.close();
direct.destroy();
viaProxy.destroy();

const throughputDirect = median(throughput.direct);
const throughputTunnel = median(throughput.tunnel);
const throughputForward = median(throughput.forward);
const result = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, loadAverage1m: round(loadavg()[0] ?? 0, 2) },
  downloadMiB: DOWNLOAD_BYTES / 1024 / 1024,
  rounds: ROUNDS,
  throughputMiBps: {
    direct: round(throughputDirect, 0),
    tunnel: round(throughputTunnel, 0),
    forward: round(throughputForward, 0),
    tunnelRatio: round(throughputTunnel / throughputDirect, 2),
    forwardRatio: round(throughputForward / throughputDirect, 2),
  },
  latencyMs: {
    direct: latencyDirect,
    tunnel: latencyTunnel,
    forward: latencyForward,
    newTunnel: latencyNewTunnel,
    tunnelAddedP50: round(latencyTunnel.p50 - latencyDirect.p50),
    forwardAddedP50: round(latencyForward.p50 - latencyDirect.p50),
  },
  memory: {
    tunnels: TUNNELS,
    idleRssMiB: round(idle.rss / 1024 / 1024, 1),
    rssMiB: round(loaded.rss / 1024 / 1024, 1),
    // After a full collection: what the open tunnels hold (sockets, buffers), not garbage.
    perTunnelKiB: round((loaded.heapUsed + loaded.external - idle.heapUsed - idle.external) / TUNNELS / 1024, 1),
    perTunnelRssKiB: round((loaded.rss - idle.rss) / TUNNELS / 1024, 1),
  },
  goals: {
    throughputAtLeast: 0.9,
    addedP50UnderMs: 1,
    throughputMet: throughputTunnel / throughputDirect >= 0.9,
    latencyMet: latencyTunnel.p50 - latencyDirect.p50 < 1 && latencyForward.p50 - latencyDirect.p50 < 1,
  },
};
writeFileSync(resultsFile, `${JSON.stringify(result, null, 2)}\n`);
console.log(`| figure | through the proxy | direct |
| --- | --- | --- |
| 100 MiB download, CONNECT tunnel, MiB/s (median of ${ROUNDS}) | ${result.throughputMiBps.tunnel} (${result.throughputMiBps.tunnelRatio}x) | ${result.throughputMiBps.direct} |
| 100 MiB download, plain HTTP forwarded, MiB/s | ${result.throughputMiBps.forward} (${result.throughputMiBps.forwardRatio}x) | ${result.throughputMiBps.direct} |
| ${REQUESTS} small requests in a kept tunnel, p50 / p99 ms | ${latencyTunnel.p50} / ${latencyTunnel.p99} | ${latencyDirect.p50} / ${latencyDirect.p99} |
| ${REQUESTS} small requests forwarded (kept connections), p50 / p99 ms | ${latencyForward.p50} / ${latencyForward.p99} | ${latencyDirect.p50} / ${latencyDirect.p99} |
| a new tunnel (CONNECT answered), p50 / p99 ms | ${latencyNewTunnel.p50} / ${latencyNewTunnel.p99} | |
| proxy RSS with ${TUNNELS} tunnels open, MiB | ${result.memory.rssMiB} (idle ${result.memory.idleRssMiB}; ${result.memory.perTunnelKiB} KiB of heap and buffers per tunnel) | |`);
