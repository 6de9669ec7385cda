// Benchmark of the egress proxy (`make bench-egress`), each figure against a direct connection
// in the same run: a 100 MB download (through a CONNECT tunnel, and forwarded as plain HTTP),
// the latency of 1 000 small sequential requests on kept connections, and the proxy's memory
// with 100 tunnels open at once. The proxy is its own process (egress-proxy-harness.ts). Writes
// test/bench/results/egress.json and prints a table. Goals (issue #12): at least 90 % of direct
// throughput, under 1 ms added p50 per request.
//
// The tunnels carry TLS, as a sandbox's https does (the proxy refuses plain HTTP in a tunnel,
// and reads the ClientHello's server name, which must be the CONNECT's host): the upstream
// serves a certificate made at the start (bench-certificate.ts), and the client checks it and
// asks for the tunnel's host by SNI. A tunnel's peer is a direct TLS connection to the same
// upstream (`directTls`), so TLS at both ends costs the two paths alike; the forwarded path
// carries plain HTTP, and its peer is a direct plain HTTP connection (`direct`).
//
// The download is measured twice: over loopback, where nothing limits it but the CPU, and (as
// root, with iproute2) from an upstream across a link of 1 and of 5 Gbit/s (shaped-link.ts), as
// a registry is reached. Loopback is the relay's ceiling on this machine; the link is what an
// install through it gets.
//
// How the comparison is kept fair on a small shared machine:
// - every path is measured by the same client code in this process, against an upstream in
//   this process serving the same bytes (over TLS, or in plain HTTP, as its peer does); only
//   where the client connects differs;
// - the paths take turns: each round runs every path once, in an order rotated from round to
//   round, and the latency requests go in blocks of 100 per path, also rotated, so a change of
//   the machine's load falls on all of them alike; a ratio is the median of the rounds' own
//   ratios (path / its direct peer in the same round);
// - a floor sits beside the proxy: a second process that only pipes bytes (tcp-relay-harness.ts),
//   here the same TLS a tunnel carries.
//   Direct, the bytes are copied once between two sockets of one process; any relay adds a
//   process and a second copy, which on two cores competes with this process for the CPU. The
//   proxy against the floor is the proxy's own cost; the floor against direct is the machine's;
// - the CPU time the relaying process spent per 100 MiB is reported beside the throughput: it
//   is what the proxy costs, and it moves far less with other people's load than MiB/s does.
//
// EGRESS_BENCH_BASELINE=<git ref> also runs that ref's proxy as a third relaying process, so a
// change to the data path is measured against the code before it in the same run. The ref's
// operator/src is extracted whole (git archive) and its proxy runs with its own decisions,
// relay and limits: taking only its egress-proxy-server.ts broke on any module renamed since
// (per-run-limit.ts before 17fa23f) and measured today's tunnel-relay.ts under the old name.
// What stays today's: the dependencies the harness passes (egressKey, policy, lookupRun,
// resolve, record: the same since c23138f, where the baseline came in) and the credential the
// client sends (proxyToken); a ref that derived it otherwise answers 407, and the bench stops
// with that answer.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { Agent, request, type IncomingMessage, type RequestOptions } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { connect as connectTls, type ConnectionOptions } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';
import { createBenchCertificate } from './bench-certificate.ts';
import { createBenchTlsUpstream, createBenchUpstream } from './bench-upstream.ts';
import { LINK_ADDRESS, openShapedLink } from './shaped-link.ts';

const resultsFile = fileURLToPath(new URL('./results/egress.json', import.meta.url));
const proxyHarness = fileURLToPath(new URL('./egress-proxy-harness.ts', import.meta.url));
const floorHarness = fileURLToPath(new URL('./tcp-relay-harness.ts', import.meta.url));
const linkUpstreamMain = fileURLToPath(new URL('./egress-link-upstream.ts', import.meta.url));
const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));
const KEY = 'bench-egress-key-0123456789abcdef0123456789abcdef';
const UID = '11111111-1111-4111-8111-111111111111';
const AUTH = `Basic ${Buffer.from(`${UID}:${proxyToken(KEY, UID)}`).toString('base64')}`;
const DOWNLOAD_BYTES = 100 * 1024 * 1024;
const REQUESTS = 1000;
const LATENCY_BLOCKS = 10;
const TUNNELS = 100;
const ROUNDS = 7;
/** The speeds of the shaped link, Gbit/s: a fast link to a registry, and one near what loopback gives. */
const LINK_GBITS = [1, 5];
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

// ---- the upstreams: over loopback, and across the shaped link if this machine can make one ----
// The names the proxy's run may reach (the harness resolves each to its address); the
// certificate names both, and a client asks for the one it tunnels to.
const LOOPBACK_HOST = 'upstream.test';
const LINK_HOST = 'link.upstream.test';
const certificate = createBenchCertificate([LOOPBACK_HOST, LINK_HOST]);
process.on('exit', () => certificate.remove());
// Plain HTTP for the forwarded path and its direct peer; TLS for the tunnels and theirs.
const upstream = createBenchUpstream(DOWNLOAD_BYTES);
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamPort = (upstream.address() as AddressInfo).port;
const tlsUpstream = createBenchTlsUpstream(DOWNLOAD_BYTES, certificate);
await new Promise<void>((resolve) => tlsUpstream.listen(0, '127.0.0.1', resolve));
const tlsUpstreamPort = (tlsUpstream.address() as AddressInfo).port;
const opened = openShapedLink();
const link = 'link' in opened ? opened.link : undefined;
const linkUnavailable = 'unavailable' in opened ? opened.unavailable : undefined;
process.on('exit', () => link?.close());
const linkUpstreamCommand = [
  process.execPath,
  '--import',
  'tsx',
  linkUpstreamMain,
  LINK_ADDRESS,
  String(DOWNLOAD_BYTES),
  certificate.certFile,
  certificate.keyFile,
];
const linkPort = link ? (JSON.parse((await link.start(linkUpstreamCommand)).firstLine) as { port: number }).port : undefined;

// ---- the relaying processes: the proxy, the floor, and the baseline proxy if asked --------
interface RelayProcess {
  port: number;
  /** Its answer to a stdin command (relay-process-stats.ts). */
  ask<T>(command: 'memory' | 'cpu'): Promise<T>;
  child: ChildProcess;
}
// Ended with this process, however it ends: a failed phase leaves no relay behind.
const relays: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of relays) child.kill('SIGTERM');
});
async function startRelay(args: string[]): Promise<RelayProcess> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  relays.push(child);
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
/**
 * The baseline ref's operator/src/egress, in a copy of that ref's package.json and operator/src
 * (its modules import each other by relative paths, and one another's directories), with this
 * checkout's node_modules beside it for any package they import.
 */
function baselineEgressDirectory(ref: string): { directory: string; cleanup: () => void } {
  const root = mkdtempSync(path.join(tmpdir(), 'chamvi-egress-baseline-'));
  const cleanup = () => rmSync(root, { recursive: true, force: true });
  try {
    const archive = path.join(root, 'source.tar');
    execFileSync('git', ['archive', '--output', archive, ref, '--', 'package.json', 'operator/src'], {
      cwd: repositoryRoot,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    execFileSync('tar', ['-xf', archive, '-C', root], { stdio: ['ignore', 'ignore', 'pipe'] });
    rmSync(archive);
    symlinkSync(path.join(repositoryRoot, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  } catch (error) {
    cleanup();
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`EGRESS_BENCH_BASELINE=${ref}: extracting its operator/src failed: ${stderr || (error as Error).message}`);
  }
  return { directory: path.join(root, 'operator/src/egress'), cleanup };
}
// The proxy's run may reach each upstream (the plain and the TLS one over loopback, the TLS one
// across the link); the harness resolves each name to its address.
const hosts = [
  `${LOOPBACK_HOST}:${upstreamPort}=127.0.0.1`,
  `${LOOPBACK_HOST}:${tlsUpstreamPort}=127.0.0.1`,
  ...(linkPort ? [`${LINK_HOST}:${linkPort}=${LINK_ADDRESS}`] : []),
].join(',');
const proxy = await startRelay([proxyHarness, KEY, UID, hosts]);
// The floor relays whatever it is given: it carries the TLS the tunnel carries.
const floor = await startRelay([floorHarness, String(tlsUpstreamPort)]);
const baselineSource = baselineRef ? baselineEgressDirectory(baselineRef) : undefined;
process.on('exit', () => baselineSource?.cleanup());
const baseline = baselineSource ? await startRelay([proxyHarness, KEY, UID, hosts, baselineSource.directory]) : undefined;

interface ProxyMemory {
  rss: number;
  heapUsed: number;
  external: number;
}

/** A CONNECT tunnel to an upstream (by default the loopback TLS one) through a proxy. */
function tunnel(proxyPort = proxy.port, target = `${LOOPBACK_HOST}:${tlsUpstreamPort}`): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1');
    socket.once('error', reject);
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
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

/**
 * TLS as a sandbox's https client speaks it: the certificate checked (the bench's is its only
 * CA) and the host asked for by SNI, the name the proxy compares with the CONNECT's host.
 */
const speakTls = (options: ConnectionOptions, host = LOOPBACK_HOST) => connectTls({ ca: certificate.cert, servername: host, ...options });

/**
 * A kept agent whose connection `connection()` makes: every TLS path goes through one, so the
 * direct, floor and tunnel paths share the client code and differ only in where it connects.
 */
function agentOver(connection: () => Socket): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  (agent as unknown as { createConnection: () => Socket }).createConnection = connection;
  return agent;
}
/** An agent whose one connection is TLS through a tunnel (https over CONNECT, as a sandbox's). */
const tunnelAgent = (socket: Socket, host = LOOPBACK_HOST) => agentOver(() => speakTls({ socket }, host));

const keptAgent = () => new Agent({ keepAlive: true, maxSockets: 1 });
const directAgent = keptAgent();
const directTlsAgent = agentOver(() => speakTls({ host: '127.0.0.1', port: tlsUpstreamPort }));
// The floor relays bytes as they are: the client speaks TLS to it as to the upstream.
const floorAgent = agentOver(() => speakTls({ host: '127.0.0.1', port: floor.port }));
const forwardAgent = keptAgent();
const baselineForwardAgent = keptAgent();
const directGet = (pathname: string) => timeGet({ host: '127.0.0.1', port: upstreamPort, path: pathname, agent: directAgent });
const directTlsGet = (pathname: string) => timeGet({ host: LOOPBACK_HOST, path: pathname, agent: directTlsAgent });
const floorGet = (pathname: string) => timeGet({ host: LOOPBACK_HOST, path: pathname, agent: floorAgent });
const forwardGet = (pathname: string, via = proxy, agent = forwardAgent) =>
  timeGet({
    host: '127.0.0.1',
    port: via.port,
    path: `http://upstream.test:${upstreamPort}${pathname}`,
    agent,
    headers: { 'proxy-authorization': AUTH },
  });
/** A download in a new tunnel, TLS end to end in it, to `host` (at `port`, default the loopback TLS upstream). */
async function tunnelGet(pathname: string, via = proxy, host = LOOPBACK_HOST, port = tlsUpstreamPort) {
  const socket = await tunnel(via.port, `${host}:${port}`);
  const agent = tunnelAgent(socket, host);
  try {
    return await timeGet({ host, path: pathname, agent });
  } finally {
    agent.destroy();
    socket.destroy();
  }
}

// ---- memory at 100 concurrent tunnels (first, so no earlier phase's connections count) ----
const idle = await proxy.ask<ProxyMemory>('memory');
const open = await Promise.all(Array.from({ length: TUNNELS }, () => tunnel()));
const openAgents = open.map((socket) => tunnelAgent(socket));
// Each tunnel carries a TLS handshake and one request, so every one has moved data both ways.
await Promise.all(openAgents.map((agent) => timeGet({ host: LOOPBACK_HOST, path: '/small', agent })));
await new Promise((resolve) => setTimeout(resolve, 500));
const loaded = await proxy.ask<ProxyMemory>('memory');
for (const agent of openAgents) agent.destroy();
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
  { name: 'directTls', get: () => directTlsGet('/big') },
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
interface Downloads {
  /** Per path, MiB/s of each round. */
  mibps: Record<string, number[]>;
  relayCpuMs: Record<string, number[]>;
  clientCpuMs: Record<string, number[]>;
}
async function measureDownloads(paths: ThroughputPath[]): Promise<Downloads> {
  const downloads: Downloads = { mibps: {}, relayCpuMs: {}, clientCpuMs: {} };
  for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex++) {
    for (const way of rotated(paths, roundIndex)) {
      const relayBefore = way.relay ? (await way.relay.ask<{ cpuMs: number }>('cpu')).cpuMs : 0;
      const clientBefore = process.cpuUsage();
      const result = await way.get();
      const client = process.cpuUsage(clientBefore);
      const relayAfter = way.relay ? (await way.relay.ask<{ cpuMs: number }>('cpu')).cpuMs : 0;
      if (result.bytes !== DOWNLOAD_BYTES) throw new Error(`${way.name}: got ${result.bytes} bytes`);
      (downloads.mibps[way.name] ??= []).push(DOWNLOAD_BYTES / 1024 / 1024 / (result.ms / 1000));
      (downloads.clientCpuMs[way.name] ??= []).push((client.user + client.system) / 1000);
      if (way.relay) (downloads.relayCpuMs[way.name] ??= []).push(relayAfter - relayBefore);
    }
  }
  return downloads;
}
/** The median over the rounds of path / peer, each ratio taken within one round. */
const pairedRatioOf = (mibps: Record<string, number[]>, name: string, peer = 'direct') =>
  round(median(mibps[name]!.map((value, index) => value / mibps[peer]![index]!)), 2);
const { mibps, relayCpuMs, clientCpuMs } = await measureDownloads(throughputPaths);
const pairedRatio = (name: string, peer = 'direct') => pairedRatioOf(mibps, name, peer);

// ---- the same download across the shaped link, at each speed: direct against the tunnel -----
// Both over TLS to the upstream across the link, as a registry is reached.
const linkDirectAgent = agentOver(() => speakTls({ host: LINK_ADDRESS, port: linkPort }, LINK_HOST));
const linkPaths: ThroughputPath[] = [
  { name: 'direct', get: () => timeGet({ host: LINK_HOST, path: '/big', agent: linkDirectAgent }) },
  { name: 'tunnel', get: () => tunnelGet('/big', proxy, LINK_HOST, linkPort), relay: proxy },
];
const links: { gbit: number; direct: number; tunnel: number; tunnelRatio: number; met: boolean }[] = [];
for (const gbit of link ? LINK_GBITS : []) {
  link!.setRate(gbit);
  const downloads = await measureDownloads(linkPaths);
  const tunnelRatio = pairedRatioOf(downloads.mibps, 'tunnel');
  links.push({
    gbit,
    direct: round(median(downloads.mibps.direct!), 0),
    tunnel: round(median(downloads.mibps.tunnel!), 0),
    tunnelRatio,
    met: tunnelRatio >= 0.9,
  });
}
linkDirectAgent.destroy();

// ---- latency: blocks of 100 requests per path, in a rotated order ------------------------------
const latencySocket = await tunnel();
const latencyTunnelAgent = tunnelAgent(latencySocket);
const baselineSocket = baseline ? await tunnel(baseline.port) : undefined;
const baselineTunnelAgent = baselineSocket ? tunnelAgent(baselineSocket) : undefined;
const latencyPaths: { name: string; get: () => Promise<{ ms: number }> }[] = [
  { name: 'direct', get: () => directGet('/small') },
  { name: 'directTls', get: () => directTlsGet('/small') },
  { name: 'floor', get: () => floorGet('/small') },
  { name: 'tunnel', get: () => timeGet({ host: LOOPBACK_HOST, path: '/small', agent: latencyTunnelAgent }) },
  { name: 'forward', get: () => forwardGet('/small') },
  ...(baseline && baselineTunnelAgent
    ? [
        { name: 'baselineTunnel', get: () => timeGet({ host: LOOPBACK_HOST, path: '/small', agent: baselineTunnelAgent }) },
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
latencyTunnelAgent.destroy();
baselineTunnelAgent?.destroy();
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
upstream.close();
tlsUpstream.close();
link?.close();
for (const agent of [directAgent, directTlsAgent, floorAgent, forwardAgent, baselineForwardAgent]) agent.destroy();

const throughputMedian = (name: string) => round(median(mibps[name]!), 0);
const cpuPer100MiB = (name: string) => round((median(relayCpuMs[name]!) * 100 * 1024 * 1024) / DOWNLOAD_BYTES, 0);
const latencyDirect = latency('direct');
const latencyDirectTls = latency('directTls');
const latencyTunnel = latency('tunnel');
const latencyForward = latency('forward');
const latencyFloor = latency('floor');
const latencyNewTunnel = { p50: round(percentile(newTunnelSamples, 50)), p99: round(percentile(newTunnelSamples, 99)), n: REQUESTS };
// A path carrying TLS against direct TLS, one carrying plain HTTP against direct plain HTTP.
const tunnelRatio = pairedRatio('tunnel', 'directTls');
const result = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, loadAverage1m: round(loadavg()[0] ?? 0, 2), loadAverage1mAtStart: loadAtStart },
  downloadMiB: DOWNLOAD_BYTES / 1024 / 1024,
  rounds: ROUNDS,
  // The tunnels and the floor carry TLS, their peer is directTls; the forwarded path and its
  // peer, direct, carry plain HTTP.
  throughputMiBps: {
    direct: throughputMedian('direct'),
    directTls: throughputMedian('directTls'),
    floor: throughputMedian('floor'),
    tunnel: throughputMedian('tunnel'),
    forward: throughputMedian('forward'),
    // Each the median over the rounds of that round's path / its direct peer (or / floor).
    directTlsRatio: pairedRatio('directTls'),
    floorRatio: pairedRatio('floor', 'directTls'),
    tunnelRatio,
    forwardRatio: pairedRatio('forward'),
    tunnelToFloor: pairedRatio('tunnel', 'floor'),
    ...(baseline
      ? {
          baselineRef,
          baselineTunnel: throughputMedian('baselineTunnel'),
          baselineForward: throughputMedian('baselineForward'),
          baselineTunnelRatio: pairedRatio('baselineTunnel', 'directTls'),
          baselineForwardRatio: pairedRatio('baselineForward'),
        }
      : {}),
  },
  // CPU time of the relaying process per 100 MiB moved (median of the rounds), and of this
  // process (the client and the upstream) for the direct downloads, for scale.
  cpuMsPer100MiB: {
    clientAndUpstreamDirect: round(median(clientCpuMs.direct!), 0),
    clientAndUpstreamDirectTls: round(median(clientCpuMs.directTls!), 0),
    floor: cpuPer100MiB('floor'),
    tunnel: cpuPer100MiB('tunnel'),
    forward: cpuPer100MiB('forward'),
    ...(baseline ? { baselineTunnel: cpuPer100MiB('baselineTunnel'), baselineForward: cpuPer100MiB('baselineForward') } : {}),
  },
  latencyMs: {
    direct: latencyDirect,
    directTls: latencyDirectTls,
    floor: latencyFloor,
    tunnel: latencyTunnel,
    forward: latencyForward,
    newTunnel: latencyNewTunnel,
    ...(baseline ? { baselineTunnel: latency('baselineTunnel'), baselineForward: latency('baselineForward') } : {}),
    floorAddedP50: round(latencyFloor.p50 - latencyDirectTls.p50),
    tunnelAddedP50: round(latencyTunnel.p50 - latencyDirectTls.p50),
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
  // The download from an upstream across a link of each speed (veth and tc tbf), over TLS direct
  // and through a tunnel, median of the rounds; or why the link could not be made here.
  link: link ? { speeds: links } : { unavailable: linkUnavailable },
  goals: {
    throughputAtLeast: 0.9,
    addedP50UnderMs: 1,
    // Over loopback (the relay's ceiling on this machine) and across each link speed.
    throughputMet: tunnelRatio >= 0.9,
    ...(link ? { linkThroughputMet: links.every((speed) => speed.met) } : {}),
    latencyMet: latencyTunnel.p50 - latencyDirectTls.p50 < 1 && latencyForward.p50 - latencyDirect.p50 < 1,
  },
};
writeFileSync(resultsFile, `${JSON.stringify(result, null, 2)}\n`);
const t = result.throughputMiBps;
const c = result.cpuMsPer100MiB;
const baselineRows = baseline
  ? `
| the same through ${baselineRef}'s proxy: tunnel (TLS) / forwarded, MiB/s | ${t.baselineTunnel} (${t.baselineTunnelRatio}x) / ${t.baselineForward} (${t.baselineForwardRatio}x); CPU ${c.baselineTunnel} / ${c.baselineForward} ms per 100 MiB | ${t.directTls} TLS / ${t.direct} |
| ${REQUESTS} small requests through ${baselineRef}'s proxy: tunnel (TLS) / forwarded p50, ms | ${result.latencyMs.baselineTunnel?.p50} / ${result.latencyMs.baselineForward?.p50} | ${latencyDirectTls.p50} TLS / ${latencyDirect.p50} |`
  : '';
console.log(`| figure | through the proxy | direct |
| --- | --- | --- |
| 100 MiB download over loopback, TLS in a CONNECT tunnel, MiB/s (median of ${ROUNDS}) | ${t.tunnel} (${t.tunnelRatio}x; ${t.tunnelToFloor}x the floor); CPU ${c.tunnel} ms per 100 MiB | ${t.directTls} TLS |
| 100 MiB download, plain HTTP forwarded, MiB/s | ${t.forward} (${t.forwardRatio}x); CPU ${c.forward} ms per 100 MiB | ${t.direct} |
| floor: 100 MiB of TLS through a bare pipe() relay process, MiB/s | ${t.floor} (${t.floorRatio}x); CPU ${c.floor} ms per 100 MiB | ${t.directTls} TLS |
| direct TLS against direct plain HTTP, MiB/s (client and upstream CPU per 100 MiB) | | ${t.directTls} (${t.directTlsRatio}x; ${c.clientAndUpstreamDirectTls} ms) / ${t.direct} (${c.clientAndUpstreamDirect} ms) |
| ${REQUESTS} small requests in a kept TLS tunnel, p50 / p99 ms | ${latencyTunnel.p50} / ${latencyTunnel.p99} | ${latencyDirectTls.p50} / ${latencyDirectTls.p99} TLS |
| ${REQUESTS} small requests forwarded (kept connections), p50 / p99 ms | ${latencyForward.p50} / ${latencyForward.p99} | ${latencyDirect.p50} / ${latencyDirect.p99} |
| ${REQUESTS} small requests of TLS through the floor relay, p50 / p99 ms | ${latencyFloor.p50} / ${latencyFloor.p99} | ${latencyDirectTls.p50} / ${latencyDirectTls.p99} TLS |
| a new tunnel (CONNECT answered), p50 / p99 ms | ${latencyNewTunnel.p50} / ${latencyNewTunnel.p99} | |
${
  link
    ? links
        .map(
          (speed) =>
            `| 100 MiB download across a ${speed.gbit} Gbit/s link, TLS in a CONNECT tunnel, MiB/s | ${speed.tunnel} (${speed.tunnelRatio}x) | ${speed.direct} TLS |`,
        )
        .join('\n')
    : `| 100 MiB download across a shaped link | not measured: ${linkUnavailable} | |`
}
| proxy RSS with ${TUNNELS} tunnels open, MiB | ${result.memory.rssMiB} (idle ${result.memory.idleRssMiB}; ${result.memory.perTunnelKiB} KiB of heap and buffers per tunnel) | |${baselineRows}
machine: ${result.machine.cpus} cores, load average ${loadAtStart} at the start, ${result.machine.loadAverage1m} at the end`);
