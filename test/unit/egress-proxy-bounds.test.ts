// The egress proxy (egress-proxy-server.ts) against a sandbox that tries to exhaust it, on real
// loopback sockets: whatever a client does (hang up after each request, hold connections with
// no credential, open tunnels from many runs), what the proxy holds stays within its bounds,
// and what it holds for a client that left is let go.
import { connect, createServer, type Server } from 'node:net';
import { describe, expect, it } from 'vitest';
import { OPEN_PER_RUN, type ConnectionLimits, type EgressRun, type OpenLimits } from '../../operator/src/egress/decide-connection.ts';
import { createEgressProxyServer } from '../../operator/src/egress/egress-proxy-server.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';
import { loopbackServers } from '../support/loopback-servers.ts';

const KEY = 'unit-egress-key-0123456789abcdef0123456789abcdef';
const auth = (uid: string) => `Basic ${Buffer.from(`${uid}:${proxyToken(KEY, uid)}`).toString('base64')}`;
const uidOf = (index: number) => `22222222-2222-4222-8222-${String(index).padStart(12, '0')}`;

const { listen, track } = loopbackServers();

/**
 * A destination that reads what it is sent and never answers nor hangs up, not even when the
 * proxy does (half-open): it counts connections, those the proxy has not hung up, and request heads.
 */
async function silentDestination() {
  const seen = { open: 0, total: 0, heads: [] as string[] };
  const port = await listen(
    createServer({ allowHalfOpen: true }, (socket) => {
      track(socket);
      seen.open++;
      seen.total++;
      socket.on('data', (data: Buffer) => seen.heads.push(...(data.toString('latin1').match(/^GET \S+/gm) ?? [])));
      socket.on('error', () => undefined);
      let gone = false;
      const hungUp = () => {
        if (gone) return;
        gone = true;
        seen.open--;
      };
      socket.on('end', hungUp);
      socket.on('close', hungUp);
    }),
  );
  return { port, seen };
}

/** A destination that echoes what it is sent, so a tunnel can be shown to work. */
async function echoDestination() {
  return listen(
    createServer((socket) => {
      socket.on('error', () => undefined);
      socket.pipe(socket);
    }),
  );
}

/** The proxy, serving `runs` (allowed `*.test` on the destination's port), with the bounds given. */
async function startProxy(
  destinationPort: number,
  runs: EgressRun[],
  bounds: { openLimits?: OpenLimits; connectionLimits?: ConnectionLimits; headersTimeoutMs?: number } = {},
) {
  const directory = new Map(runs.map((run) => [run.uid, run]));
  const proxy = createEgressProxyServer({
    egressKey: KEY,
    policy: {
      allowEgress: parseHostPatterns([`*.test:${destinationPort}`]),
      allowPrivateDestinations: parseHostPatterns([`*.test:${destinationPort}`]),
      apiServer: [],
    },
    lookupRun: (uid) => directory.get(uid),
    resolve: () => Promise.resolve(['127.0.0.1']),
    record: () => undefined,
    refusalLingerMs: 1_000,
    ...bounds,
  });
  return listen(proxy as unknown as Server);
}

const runIn = (namespace: string, index: number, destinationPort: number): EgressRun => ({
  namespace,
  name: `run-${index}`,
  uid: uidOf(index),
  allow: parseHostPatterns([`*.test:${destinationPort}`]),
});

/** A client connection (from `localAddress`, default 127.0.0.1) collecting what it receives, and whether the proxy closed it. */
function client(proxyPort: number, localAddress = '127.0.0.1') {
  const socket = connect({ port: proxyPort, host: '127.0.0.1', localAddress });
  track(socket);
  const state = { text: '', closed: false, socket };
  socket.on('data', (data: Buffer) => (state.text += data.toString('latin1')));
  socket.on('error', () => undefined);
  socket.on('close', () => (state.closed = true));
  return state;
}

/** Opens a CONNECT tunnel and resolves with the proxy's answer head. */
async function tunnel(proxyPort: number, uid: string, destinationPort: number) {
  const state = client(proxyPort);
  state.socket.write(`CONNECT d.test:${destinationPort} HTTP/1.1\r\nProxy-Authorization: ${auth(uid)}\r\n\r\n`);
  await expect.poll(() => state.text.includes('\r\n\r\n') || state.closed, { timeout: 5_000 }).toBe(true);
  return Object.assign(state, { head: state.text });
}

const allClosed = (states: Array<{ closed: boolean }>) => states.every((state) => state.closed);

describe('egress proxy bounds', { timeout: 30_000 }, () => {
  it(`ends a forwarded request upstream when its client leaves: nothing of it stays open or goes out later, never more than ${OPEN_PER_RUN} at once`, async () => {
    const destination = await silentDestination();
    const run = runIn('team-a', 1, destination.port);
    const proxyPort = await startProxy(destination.port, [run]);
    for (let round = 0; round < 2; round++) {
      const headsBefore = destination.seen.heads.length;
      const clients = Array.from({ length: 200 }, (_, index) => {
        const state = client(proxyPort);
        state.socket.write(
          `GET http://d.test:${destination.port}/${round}-${index} HTTP/1.1\r\nHost: d.test\r\nProxy-Authorization: ${auth(run.uid)}\r\n\r\n`,
        );
        return state;
      });
      // Every request either reached the destination or was refused for the run's bound; a
      // request the proxy would hold back for later is waited for a while, and counted below.
      const settled = () =>
        destination.seen.heads.length - headsBefore + clients.filter((state) => state.text.startsWith('HTTP/1.1 429 ')).length;
      await expect
        .poll(settled, { timeout: 3_000 })
        .toBe(200)
        .catch(() => undefined);
      const forwarded = destination.seen.heads.length - headsBefore;
      const refused = clients.filter((state) => /^HTTP\/1\.1 429 [\s\S]*too-many-open/.test(state.text)).length;
      for (const state of clients) state.socket.destroy();
      // Gone with their clients: every upstream connection closes, long before the destination would time out.
      await expect.poll(() => destination.seen.open, { timeout: 5_000 }).toBe(0);
      // The run's bound held them: as many forwarded as it allows, the others refused, none held back.
      expect({ forwarded, refused }).toEqual({ forwarded: OPEN_PER_RUN, refused: 200 - OPEN_PER_RUN });
    }
    // And none goes out afterwards.
    const { total, heads } = { total: destination.seen.total, heads: destination.seen.heads.length };
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(destination.seen.total).toBe(total);
    expect(destination.seen.heads).toHaveLength(heads);
    expect(heads).toBe(2 * OPEN_PER_RUN);
  });

  it('closes a connection it refused 407, rather than keeping it alive for the next refusal', async () => {
    const destination = await silentDestination();
    const proxyPort = await startProxy(destination.port, []);
    const clients = Array.from({ length: 50 }, (_, index) => {
      const state = client(proxyPort);
      state.socket.write(`GET http://x${index}.test:${destination.port}/ HTTP/1.1\r\nHost: x.test\r\nConnection: keep-alive\r\n\r\n`);
      return state;
    });
    await expect.poll(() => clients.every((state) => state.text.startsWith('HTTP/1.1 407 ')), { timeout: 5_000 }).toBe(true);
    expect(clients.every((state) => /\r\nconnection: close\r\n/i.test(state.text))).toBe(true);
    await expect.poll(() => allClosed(clients), { timeout: 3_000 }).toBe(true);
    expect(destination.seen.total).toBe(0);
  });

  it('closes a refused request whose body never comes, rather than reading it for ever', async () => {
    const destination = await silentDestination();
    const proxyPort = await startProxy(destination.port, []);
    const state = client(proxyPort);
    // The client promises a megabyte and sends a few bytes of it.
    state.socket.write(`POST http://x.test:${destination.port}/ HTTP/1.1\r\nHost: x.test\r\nContent-Length: 1000000\r\n\r\nabc`);
    await expect.poll(() => state.text.startsWith('HTTP/1.1 407 '), { timeout: 5_000 }).toBe(true);
    await expect.poll(() => state.closed, { timeout: 3_000 }).toBe(true);
  });

  it('closes a connection that never sends a whole request head', async () => {
    const destination = await silentDestination();
    const proxyPort = await startProxy(destination.port, [], { headersTimeoutMs: 300 });
    const silent = client(proxyPort);
    const partial = client(proxyPort);
    partial.socket.write(`CONNECT d.test:${destination.port} HTTP/1.1\r\n`);
    await expect.poll(() => allClosed([silent, partial]), { timeout: 5_000 }).toBe(true);
  });

  it('refuses connections from one address beyond its bound (429 too-many-connections), while another address is served', async () => {
    const destination = await silentDestination();
    const proxyPort = await startProxy(destination.port, [], { connectionLimits: { perSource: 20, total: 1_000 } });
    const held = Array.from({ length: 20 }, () => client(proxyPort));
    // The proxy accepts in order: once a connection made after them is answered, all 20 are counted.
    const probe = client(proxyPort, '127.0.0.2');
    probe.socket.write(`GET http://x.test:${destination.port}/ HTTP/1.1\r\nHost: x.test\r\n\r\n`);
    await expect.poll(() => probe.text.startsWith('HTTP/1.1 407 '), { timeout: 5_000 }).toBe(true);
    const beyond = client(proxyPort);
    await expect.poll(() => beyond.text, { timeout: 5_000 }).toMatch(/^HTTP\/1\.1 429 [\s\S]*x-chamvi-egress-rule: too-many-connections/);
    await expect.poll(() => beyond.closed, { timeout: 3_000 }).toBe(true);
    expect(held.some((state) => state.closed)).toBe(false);
    // One closed gives its place back.
    held[0]!.socket.destroy();
    await expect
      .poll(
        async () => {
          const again = client(proxyPort);
          again.socket.write(`GET http://x.test:${destination.port}/ HTTP/1.1\r\nHost: x.test\r\n\r\n`);
          await expect.poll(() => again.text.length > 0, { timeout: 3_000 }).toBe(true);
          return again.text.slice(0, 12);
        },
        { timeout: 5_000 },
      )
      .toBe('HTTP/1.1 407');
  });

  it('refuses connections beyond its bound in all (429 too-many-connections), whatever their address', async () => {
    const destination = await silentDestination();
    const proxyPort = await startProxy(destination.port, [], { connectionLimits: { perSource: 1_000, total: 10 } });
    const held = Array.from({ length: 10 }, (_, index) => client(proxyPort, `127.0.0.${index + 1}`));
    // Connected, so ahead of the next in the listener's queue, which the proxy accepts in order.
    await Promise.all(held.map((state) => new Promise((resolve) => state.socket.once('connect', resolve))));
    const beyond = client(proxyPort, '127.0.0.99');
    await expect.poll(() => beyond.text, { timeout: 5_000 }).toMatch(/^HTTP\/1\.1 429 [\s\S]*x-chamvi-egress-rule: too-many-connections/);
    await expect.poll(() => beyond.closed, { timeout: 3_000 }).toBe(true);
    expect(held.some((state) => state.closed)).toBe(false);
  });

  it('refuses tunnels beyond the bound of a namespace and of the proxy (429 too-many-open), while those open keep working', async () => {
    const destinationPort = await echoDestination();
    const runs = [
      runIn('team-a', 1, destinationPort),
      runIn('team-a', 2, destinationPort),
      runIn('team-b', 3, destinationPort),
      runIn('team-c', 4, destinationPort),
    ];
    const proxyPort = await startProxy(destinationPort, runs, { openLimits: { perRun: 4, perNamespace: 6, total: 10 } });
    const open = async (run: EgressRun) => tunnel(proxyPort, run.uid, destinationPort);
    const opened = [];
    // Run 1 takes its 4; run 2 gets the 2 left to team-a; team-b's run 3 its 4: 10 in all.
    for (let i = 0; i < 4; i++) opened.push(await open(runs[0]!));
    for (let i = 0; i < 2; i++) opened.push(await open(runs[1]!));
    for (let i = 0; i < 4; i++) opened.push(await open(runs[2]!));
    expect(opened.map((answer) => answer.head.slice(0, 12))).toEqual(Array(10).fill('HTTP/1.1 200'));
    const perRun = await open(runs[0]!);
    expect(perRun.head).toMatch(/^HTTP\/1\.1 429 [\s\S]*too-many-open[\s\S]*the run already holds 4/);
    const perNamespace = await open(runs[1]!);
    expect(perNamespace.head).toMatch(/^HTTP\/1\.1 429 [\s\S]*too-many-open[\s\S]*namespace team-a already hold 6/);
    const total = await open(runs[3]!);
    expect(total.head).toMatch(/^HTTP\/1\.1 429 [\s\S]*too-many-open[\s\S]*the proxy already holds 10/);
    // The first run's tunnels still carry bytes both ways.
    const first = opened[0]!;
    // A whole line: a first line of bytes that are not TLS waits for its end (it might be an HTTP request line).
    first.socket.write('ping\n');
    await expect.poll(() => first.text.endsWith('ping\n'), { timeout: 3_000 }).toBe(true);
    // A tunnel of team-a closed gives team-a's place back, to its other run.
    opened[0]!.socket.destroy();
    await expect.poll(async () => (await open(runs[1]!)).head.slice(0, 12), { timeout: 3_000 }).toBe('HTTP/1.1 200');
  });
});
