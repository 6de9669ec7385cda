// Benchmark of the egress proxy (`make bench-egress`), each figure against a direct connection
// in the same run: a 100 MB download (through a CONNECT tunnel, and forwarded as plain HTTP),
// the latency of 1 000 small sequential requests on kept connections, and the proxy's memory
// with 100 tunnels open at once. The upstream is a loopback HTTP server; the proxy is its own
// process (egress-proxy-harness.ts). Writes test/bench/results/egress.json and prints a table.
// Goals (issue #12): at least 90 % of direct throughput, under 1 ms added p50 per request.
//
// How the comparison is kept fair on a small shared machine:
// - every path is measured by the same client code in this process, against the same upstream
//   serving the same bytes; only where the client connects differs;
// - the paths take turns: each round runs every path once, in an order rotated from round to
//   round, and the latency requests go in blocks of 100 per path, also rotated, so a change of
//   the machine's load falls on all of them alike; a ratio is the median of the rounds' own
//   ratios (path / direct in the same round);
// - a floor sits beside the proxy: a second process that only pipes bytes (tcp-relay-harness.ts).
//   Direct, the bytes are copied once between two sockets of one process; any relay adds a
//   process and a second copy, which on two cores competes with this process for the CPU. The
//   proxy against the floor is the proxy's own cost; the floor against direct is the machine's;
// - the CPU time the relaying process spent per 100 MiB is reported beside the throughput: it
//   is what the proxy costs, and it moves far less with other people's load than MiB/s does.
//
// EGRESS_BENCH_BASELINE=<git ref> also runs that ref's egress-proxy-server.ts (with today's
// decisions and credential check) as a third relaying process, so a change to the data path is
// measured against the code before it in the same run.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingMessage, type RequestOptions } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';

const resultsFile = fileURLToPath(new URL('./results/egress.json', import.meta.url));
const proxyHarness = fileURLToPath(new URL('./egress-proxy-harness.ts', import.meta.url));
const floorHarness = fileURLToPath(new URL('./tcp-relay-harness.ts', import.meta.url));
const egressDirectory = fileURLToPath(new URL('../../operator/src/egress/', import.meta.url));
const KEY = 'bench-egress-key-0123456789abcdef0123456789abcdef';
const UID = '11111111-1111-4111-8111-111111111111';
const AUTH = `Basic ${Buffer.from(`${UID}:${proxyToken(KEY, UID)}`).toString('base64')}`;
const DOWNLOAD_BYTES = 100 * 1024 * 1024;
const REQUESTS = 1000;
const LATENCY_BLOCKS = 10;
const TUNNELS = 100;
const ROUNDS = 7;
const baselineRef = process.env.EGRESS_BENCH_BASELINE;

const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
const median = (samples: number[]) => percentile(samples, 50);
/** The order of the paths in round `index`: rotated, so each path takes each place in turn. */
const rotated = <T>(items: readonly T[], index: number) => items.map((_, position) => items[(position + index) % items.length]!);
const loadAtStart = round(loadavg()[0] ?? 0, 2);

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

// ---- the relaying processes: the proxy, the floor, and the baseline proxy if asked --------
interface RelayProcess {
  port: number;
  /** Its answer to a stdin command (relay-process-stats.ts). */
  ask<T>(command: 'memory' | 'cpu'): Promise<T>;
  child: ChildProcess;
}
async function startRelay(args: string[]): Promise<RelayProcess> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => waiting.shift()?.(line));
  const nextLine = () => new Promise<string>((resolve) => waiting.push(resolve));
  const { port } = JSON.parse(await nextLine()) as { port: number };
  return {
    port,
    child,
    ask: <T>(command: string) => {
      const answer = nextLine();
      child.stdin.write(`${command}\n`);
      return answer.then((line) => JSON.parse(line) as T);
    },
  };
}
/** The baseline ref's server, its relative imports pointed at today's egress directory. */
function baselineServerModule(ref: string): { file: string; cleanup: () => void } {
  const source = execFileSync('git', ['show', `${ref}:operator/src/egress/egress-proxy-server.ts`], { encoding: 'utf8' });
  const directory = mkdtempSync(path.join(tmpdir(), 'chamvi-egress-baseline-'));
  const file = path.join(directory, 'egress-proxy-server.ts');
  writeFileSync(
    file,
    source.replaceAll(/from '\.\/([^']+)'/g, (_, name: string) => `from '${path.join(egressDirectory, name)}'`),
  );
  return { file, cleanup: () => rmSync(directory, { recursive: true, force: true }) };
}
const pattern = `upstream.test:${upstreamPort}`;
const proxy = await startRelay([proxyHarness, KEY, UID, pattern]);
const floor = await startRelay([floorHarness, String(upstreamPort)]);
const baselineModule = baselineRef ? baselineServerModule(baselineRef) : undefined;
const baseline = baselineModule ? await startRelay([proxyHarness, KEY, UID, pattern, baselineModule.file]) : undefined;

interface ProxyMemory {
  rss: number;
  heapUsed: number;
  external: number;
}

/** A CONNECT tunnel to the upstream through a proxy. */
function tunnel(proxyPort = proxy.port): Promise<Socket> {
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

const keptAgent = () => new Agent({ keepAlive: true, maxSockets: 1 });
const directAgent = keptAgent();
const floorAgent = keptAgent();
const forwardAgent = keptAgent();
const baselineForwardAgent = keptAgent();
const directGet = (pathname: string) => timeGet({ host: '127.0.0.1', port: upstreamPort, path: pathname, agent: directAgent });
// The floor relays bytes as they are: the client speaks to it as to the upstream.
const floorGet = (pathname: string) => timeGet({ host: '127.0.0.1', port: floor.port, path: pathname, agent: floorAgent });
const forwardGet = (pathname: string, via = proxy, agent = forwardAgent) =>
  timeGet({
    host: '127.0.0.1',
    port: via.port,
    path: `http://upstream.test:${upstreamPort}${pathname}`,
    agent,
    headers: { 'proxy-authorization': AUTH },
  });
async function tunnelGet(pathname: string, via = proxy) {
  const socket = await tunnel(via.port);
  try {
    return await timeGet({ host: 'upstream.test', path: pathname, agent: tunnelAgent(socket) });
  } finally {
    socket.destroy();
  }
}

// ---- memory at 100 concurrent tunnels (first, so no earlier phase's connections count) ----
const idle = await proxy.ask<ProxyMemory>('memory');
const open = await Promise.all(Array.from({ length: TUNNELS }, () => tunnel()));
// Each tunnel carries one request, so every one has moved data both ways.
await Promise.all(open.map((socket) => timeGet({ host: 'upstream.test', path: '/small', agent: tunnelAgent(socket) })));
await new Promise((resolve) => setTimeout(resolve, 500));
const loaded = await proxy.ask<ProxyMemory>('memory');
for (const socket of open) socket.destroy();

// ---- throughput: every path once per round, in a rotated order -----------------------------
interface ThroughputPath {
  name: string;
  get: () => Promise<{ ms: number; bytes: number }>;
  /** The process that relays this path's bytes (its CPU time is the path's cost). */
  relay?: RelayProcess;
}
const throughputPaths: ThroughputPath[] = [
  { name: 'direct', get: () => directGet('/big') },
  { name: 'floor', get: () => floorGet('/big'), relay: floor },
  { name: 'tunnel', get: () => tunnelGet('/big'), relay: proxy },
  { name: 'forward', get: () => forwardGet('/big'), relay: proxy },
  ...(baseline
    ? [
        { name: 'baselineTunnel', get: () => tunnelGet('/big', baseline), relay: baseline },
        { name: 'baselineForward', get: () => forwardGet('/big', baseline, baselineForwardAgent), relay: baseline },
      ]
    : []),
];
const mibps: Record<string, number[]> = {};
const relayCpuMs: Record<string, number[]> = {};
const clientCpuMs: Record<string, number[]> = {};
for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex++) {
  for (const way of rotated(throughputPaths, roundIndex)) {
    const relayBefore = way.relay ? (await way.relay.ask<{ cpuMs: number }>('cpu')).cpuMs : 0;
    const clientBefore = process.cpuUsage();
    const result = await way.get();
    const client = process.cpuUsage(clientBefore);
    const relayAfter = way.relay ? (await way.relay.ask<{ cpuMs: number }>('cpu')).cpuMs : 0;
    if (result.bytes !== DOWNLOAD_BYTES) throw new Error(`${way.name}: got ${result.bytes} bytes`);
    (mibps[way.name] ??= []).push(DOWNLOAD_BYTES / 1024 / 1024 / (result.ms / 1000));
    (clientCpuMs[way.name] ??= []).push((client.user + client.system) / 1000);
    if (way.relay) (relayCpuMs[way.name] ??= []).push(relayAfter - relayBefore);
  }
}
/** The median over the rounds of path / peer, each ratio taken within one round. */
const pairedRatio = (name: string, peer = 'direct') => round(median(mibps[name]!.map((value, index) => value / mibps[peer]![index]!)), 2);

// ---- latency: blocks of 100 requests per path, in a rotated order ------------------------------
const latencySocket = await tunnel();
const latencyTunnelAgent = tunnelAgent(latencySocket);
const baselineSocket = baseline ? await tunnel(baseline.port) : undefined;
const baselineTunnelAgent = baselineSocket ? tunnelAgent(baselineSocket) : undefined;
const latencyPaths: { name: string; get: () => Promise<{ ms: number }> }[] = [
  { name: 'direct', get: () => directGet('/small') },
  { name: 'floor', get: () => floorGet('/small') },
  { name: 'tunnel', get: () => timeGet({ host: 'upstream.test', path: '/small', agent: latencyTunnelAgent }) },
  { name: 'forward', get: () => forwardGet('/small') },
  ...(baseline && baselineTunnelAgent
    ? [
        { name: 'baselineTunnel', get: () => timeGet({ host: 'upstream.test', path: '/small', agent: baselineTunnelAgent }) },
        { name: 'baselineForward', get: () => forwardGet('/small', baseline, baselineForwardAgent) },
      ]
    : []),
];
const latencySamples: Record<string, number[]> = {};
for (const way of latencyPaths) for (let index = 0; index < 50; index++) await way.get();
for (let block = 0; block < LATENCY_BLOCKS; block++) {
  for (const way of rotated(latencyPaths, block)) {
    for (let index = 0; index < REQUESTS / LATENCY_BLOCKS; index++) (latencySamples[way.name] ??= []).push((await way.get()).ms);
  }
}
const latency = (name: string) => {
  const samples = latencySamples[name]!;
  return { p50: round(percentile(samples, 50)), p99: round(percentile(samples, 99)), n: samples.length };
};
latencySocket.destroy();
baselineSocket?.destroy();
// A new tunnel per request: what a client that keeps nothing pays (the proxy's decision, the upstream connect).
const newTunnelSamples: number[] = [];
for (let index = 0; index < REQUESTS; index++) {
  const started = performance.now();
  (await tunnel()).destroy();
  newTunnelSamples.push(performance.now() - started);
}

for (const relay of [proxy, floor, baseline]) relay?.child.kill('SIGTERM');
baselineModule?.cleanup();
upstream.close();
for (const agent of [directAgent, floorAgent, forwardAgent, baselineForwardAgent]) agent.destroy();

const throughputMedian = (name: string) => round(median(mibps[name]!), 0);
const cpuPer100MiB = (name: string) => round((median(relayCpuMs[name]!) * 100 * 1024 * 1024) / DOWNLOAD_BYTES, 0);
const latencyDirect = latency('direct');
const latencyTunnel = latency('tunnel');
const latencyForward = latency('forward');
const latencyFloor = latency('floor');
const latencyNewTunnel = { p50: round(percentile(newTunnelSamples, 50)), p99: round(percentile(newTunnelSamples, 99)), n: REQUESTS };
const tunnelRatio = pairedRatio('tunnel');
const result = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, loadAverage1m: round(loadavg()[0] ?? 0, 2), loadAverage1mAtStart: loadAtStart },
  downloadMiB: DOWNLOAD_BYTES / 1024 / 1024,
  rounds: ROUNDS,
  throughputMiBps: {
    direct: throughputMedian('direct'),
    floor: throughputMedian('floor'),
    tunnel: throughputMedian('tunnel'),
    forward: throughputMedian('forward'),
    // Each the median over the rounds of that round's path / direct (or / floor).
    floorRatio: pairedRatio('floor'),
    tunnelRatio,
    forwardRatio: pairedRatio('forward'),
    tunnelToFloor: pairedRatio('tunnel', 'floor'),
    ...(baseline
      ? {
          baselineRef,
          baselineTunnel: throughputMedian('baselineTunnel'),
          baselineForward: throughputMedian('baselineForward'),
          baselineTunnelRatio: pairedRatio('baselineTunnel'),
          baselineForwardRatio: pairedRatio('baselineForward'),
        }
      : {}),
  },
  // CPU time of the relaying process per 100 MiB moved (median of the rounds), and of this
  // process (the client and the upstream) for the direct download, for scale.
  cpuMsPer100MiB: {
    clientAndUpstreamDirect: round(median(clientCpuMs.direct!), 0),
    floor: cpuPer100MiB('floor'),
    tunnel: cpuPer100MiB('tunnel'),
    forward: cpuPer100MiB('forward'),
    ...(baseline ? { baselineTunnel: cpuPer100MiB('baselineTunnel'), baselineForward: cpuPer100MiB('baselineForward') } : {}),
  },
  latencyMs: {
    direct: latencyDirect,
    floor: latencyFloor,
    tunnel: latencyTunnel,
    forward: latencyForward,
    newTunnel: latencyNewTunnel,
    ...(baseline ? { baselineTunnel: latency('baselineTunnel'), baselineForward: latency('baselineForward') } : {}),
    floorAddedP50: round(latencyFloor.p50 - latencyDirect.p50),
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
    throughputMet: tunnelRatio >= 0.9,
    latencyMet: latencyTunnel.p50 - latencyDirect.p50 < 1 && latencyForward.p50 - latencyDirect.p50 < 1,
  },
};
writeFileSync(resultsFile, `${JSON.stringify(result, null, 2)}\n`);
const t = result.throughputMiBps;
const c = result.cpuMsPer100MiB;
const baselineRows = baseline
  ? `
| the same through ${baselineRef}'s proxy: tunnel / forwarded, MiB/s | ${t.baselineTunnel} (${t.baselineTunnelRatio}x) / ${t.baselineForward} (${t.baselineForwardRatio}x); CPU ${c.baselineTunnel} / ${c.baselineForward} ms per 100 MiB | ${t.direct} |
| ${REQUESTS} small requests through ${baselineRef}'s proxy: tunnel / forwarded p50, ms | ${result.latencyMs.baselineTunnel?.p50} / ${result.latencyMs.baselineForward?.p50} | ${latencyDirect.p50} |`
  : '';
console.log(`| figure | through the proxy | direct |
| --- | --- | --- |
| 100 MiB download, CONNECT tunnel, MiB/s (median of ${ROUNDS}) | ${t.tunnel} (${t.tunnelRatio}x; ${t.tunnelToFloor}x the floor); CPU ${c.tunnel} ms per 100 MiB | ${t.direct} |
| 100 MiB download, plain HTTP forwarded, MiB/s | ${t.forward} (${t.forwardRatio}x); CPU ${c.forward} ms per 100 MiB | ${t.direct} |
| floor: 100 MiB through a bare pipe() relay process, MiB/s | ${t.floor} (${t.floorRatio}x); CPU ${c.floor} ms per 100 MiB | ${t.direct} |
| ${REQUESTS} small requests in a kept tunnel, p50 / p99 ms | ${latencyTunnel.p50} / ${latencyTunnel.p99} | ${latencyDirect.p50} / ${latencyDirect.p99} |
| ${REQUESTS} small requests forwarded (kept connections), p50 / p99 ms | ${latencyForward.p50} / ${latencyForward.p99} | ${latencyDirect.p50} / ${latencyDirect.p99} |
| ${REQUESTS} small requests through the floor relay, p50 / p99 ms | ${latencyFloor.p50} / ${latencyFloor.p99} | ${latencyDirect.p50} / ${latencyDirect.p99} |
| a new tunnel (CONNECT answered), p50 / p99 ms | ${latencyNewTunnel.p50} / ${latencyNewTunnel.p99} | |
| proxy RSS with ${TUNNELS} tunnels open, MiB | ${result.memory.rssMiB} (idle ${result.memory.idleRssMiB}; ${result.memory.perTunnelKiB} KiB of heap and buffers per tunnel) | |${baselineRows}
machine: ${result.machine.cpus} cores, load average ${loadAtStart} at the start, ${result.machine.loadAverage1m} at the end`);
