// The egress proxy (egress-proxy-server.ts) against hostile clients and destinations, on real
// loopback sockets with raw bytes on both sides: what the destination receives is what the
// proxy decided on (the checked host, one request per request), a destination's bad answer
// does not end the proxy, runs do not share upstream connections, and a refused CONNECT's
// socket is closed even when its client never hangs up.
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { OPEN_PER_RUN, type EgressRun } from '../../operator/src/egress/decide-connection.ts';
import { createEgressProxyServer } from '../../operator/src/egress/egress-proxy-server.ts';
import { LOOKUPS_PER_RUN, lookupsPerNamespace } from '../../operator/src/egress/lookup-limit.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';

const KEY = 'unit-egress-key-0123456789abcdef0123456789abcdef';
const RUN_A = '22222222-2222-4222-8222-222222222222';
const RUN_B = '33333333-3333-4333-8333-333333333333';
const auth = (uid: string) => `Basic ${Buffer.from(`${uid}:${proxyToken(KEY, uid)}`).toString('base64')}`;

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function listen<T extends Server>(server: T): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A destination that answers every request it parses with `answer`, and keeps what arrived on each connection. */
async function destination(answer = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok') {
  const connections: string[] = [];
  const port = await listen(
    createServer((socket) => {
      const index = connections.push('') - 1;
      socket.on('data', (data: Buffer) => {
        const before = connections[index]!;
        connections[index] = before + data.toString('latin1');
        // One answer per request head that arrived (enough for these bodiless or tiny requests).
        const heads = (text: string) => text.split('\r\n\r\n').length - 1;
        for (let i = heads(before); i < heads(connections[index]!); i++) socket.write(answer);
      });
      socket.on('error', () => undefined);
    }),
  );
  return { port, connections };
}

/** The runs the last proxy started serves (its run directory): a test deletes one to end it. */
let liveRuns = new Map<string, EgressRun>();

async function startProxy(
  destinationPort: number,
  refusalLingerMs?: number,
  resolve?: (host: string) => Promise<string[]>,
  liveCheckMs?: number,
) {
  const allow = parseHostPatterns([`*.test:${destinationPort}`, 'tunnel.test:80']);
  const runs = (liveRuns = new Map([RUN_A, RUN_B].map((uid, i) => [uid, { namespace: 'unit', name: `run-${i}`, uid, allow }])));
  const proxy = createEgressProxyServer({
    egressKey: KEY,
    policy: { allowEgress: allow, allowPrivateDestinations: allow, apiServer: [] },
    lookupRun: (uid) => runs.get(uid),
    resolve: resolve ?? ((host) => Promise.resolve(host.endsWith('.test') ? ['127.0.0.1'] : [])),
    record: () => undefined,
    // The chart's thread pool (64): both runs share a namespace, whose share holds more than one run's lookups.
    lookupLimits: { perRun: LOOKUPS_PER_RUN, perNamespace: lookupsPerNamespace(64) },
    ...(refusalLingerMs !== undefined ? { refusalLingerMs } : {}),
    ...(liveCheckMs !== undefined ? { liveCheckMs } : {}),
  });
  servers.push(proxy as unknown as Server);
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return (proxy.address() as AddressInfo).port;
}

/** Sends raw bytes to the proxy and collects what comes back until `until` holds or the socket ends. */
function exchange(proxyPort: number, bytes: string, until: (text: string) => boolean = () => false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(proxyPort, '127.0.0.1');
    sockets.push(socket);
    let text = '';
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
      if (until(text)) resolve(text);
    });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.write(bytes);
  });
}

const answered = (text: string) => /\r\n\r\n[\s\S]*ok$/.test(text) || /^HTTP\/1\.1 5\d\d/.test(text);

describe('egress proxy against hostile clients and destinations', () => {
  it('sends the host it checked, not the Host header the client wrote', async () => {
    const { port, connections } = await destination();
    const proxyPort = await startProxy(port);
    const answer = await exchange(
      proxyPort,
      `GET http://allowed.test:${port}/secret HTTP/1.1\r\nHost: vault.internal\r\nProxy-Authorization: ${auth(RUN_A)}\r\n\r\n`,
      answered,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(connections[0]).toMatch(/^GET \/secret HTTP\/1\.1\r\n/);
    expect(connections[0]).toContain(`\r\nhost: allowed.test:${port}\r\n`);
    expect(connections[0]).not.toContain('vault.internal');
  });

  it('keeps a chunked GET body a body: the destination gets one request, not a second one smuggled in it', async () => {
    const requests: Array<{ url: string; body: string }> = [];
    const port = await listen(
      createHttpServer((req, res) => {
        let body = '';
        req.on('data', (data: Buffer) => (body += data.toString()));
        req.on('end', () => {
          requests.push({ url: req.url ?? '', body });
          res.end('ok');
        });
      }) as unknown as Server,
    );
    const proxyPort = await startProxy(port);
    const smuggled = `GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n`;
    const chunk = `${Buffer.byteLength(smuggled).toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
    await exchange(
      proxyPort,
      `GET http://allowed.test:${port}/ HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\nProxy-Authorization: ${auth(RUN_A)}\r\n\r\n${chunk}`,
      answered,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(requests).toEqual([{ url: '/', body: smuggled }]);
  });

  it('refuses a CONNECT tunnel to port 80 that the run may reach, where the client would choose the Host', async () => {
    const { port, connections } = await destination();
    const proxyPort = await startProxy(port);
    const answer = await exchange(proxyPort, `CONNECT tunnel.test:80 HTTP/1.1\r\nProxy-Authorization: ${auth(RUN_A)}\r\n\r\n`, (text) =>
      text.includes('\r\n\r\n'),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('x-chamvi-egress-rule: plain-http-tunnel');
    expect(connections).toEqual([]);
  });

  it('answers 502 to a destination status outside 100-999, and goes on serving', async () => {
    const { port } = await destination('HTTP/1.1 099 Odd\r\ncontent-length: 0\r\n\r\n');
    const proxyPort = await startProxy(port);
    const request = `GET http://allowed.test:${port}/ HTTP/1.1\r\nHost: allowed.test\r\nProxy-Authorization: ${auth(RUN_A)}\r\n\r\n`;
    expect(await exchange(proxyPort, request, answered)).toMatch(/^HTTP\/1\.1 502 /);
    expect(await exchange(proxyPort, request, answered)).toMatch(/^HTTP\/1\.1 502 /);
  });

  it('never sends one run’s request on a connection another run used', async () => {
    const { port, connections } = await destination();
    const proxyPort = await startProxy(port);
    const request = (uid: string, host: string) =>
      `GET http://${host}:${port}/ HTTP/1.1\r\nHost: ${host}\r\nProxy-Authorization: ${auth(uid)}\r\n\r\n`;
    await exchange(proxyPort, request(RUN_A, 'shared.test'), answered);
    await exchange(proxyPort, request(RUN_A, 'shared.test'), answered);
    await exchange(proxyPort, request(RUN_B, 'shared.test'), answered);
    // Run A's second request reuses its kept connection; run B's goes on a connection of its own.
    expect(connections).toHaveLength(2);
    expect(connections[0]!.match(/^GET /gm)).toHaveLength(2);
    expect(connections[1]!.match(/^GET /gm)).toHaveLength(1);
  });

  it("holds a run's name lookups to a few at once, so names that never answer hold up no other run", async () => {
    const { port } = await destination();
    const asked: string[] = [];
    // Names under slow.test never answer, as a name server that drops the query.
    const proxyPort = await startProxy(port, undefined, (host) => {
      asked.push(host);
      return host.endsWith('.slow.test') ? new Promise<string[]>(() => undefined) : Promise.resolve(['127.0.0.1']);
    });
    const connectTo = (uid: string, host: string) =>
      exchange(proxyPort, `CONNECT ${host}:${port} HTTP/1.1\r\nProxy-Authorization: ${auth(uid)}\r\n\r\n`, (text) =>
        text.includes('\r\n\r\n'),
      );
    for (let i = 0; i < 10; i++) void connectTo(RUN_A, `x${i}.slow.test`).catch(() => undefined);
    expect(await connectTo(RUN_B, 'fast.test')).toMatch(/^HTTP\/1\.1 200 /);
    expect(asked.filter((host) => host.endsWith('.slow.test'))).toHaveLength(LOOKUPS_PER_RUN);
  });

  it("holds one namespace's lookups to its share of the thread pool, so its runs' names that never answer hold up no other namespace", async () => {
    const { port } = await destination();
    // getaddrinfo on a pool of 8 threads, as libuv runs it: 8 at once, the rest queued for a thread.
    const threads = 8;
    const started: string[] = [];
    const queued: Array<() => void> = [];
    let busy = 0;
    const resolve = async (host: string): Promise<string[]> => {
      if (busy >= threads) await new Promise<void>((wake) => queued.push(wake));
      busy++;
      started.push(host);
      try {
        // Names under slow.test never answer, as a name server that drops the query.
        if (host.endsWith('.slow.test')) await new Promise(() => undefined);
        return ['127.0.0.1'];
      } finally {
        busy--;
        queued.shift()?.();
      }
    };
    const allow = parseHostPatterns([`*.test:${port}`]);
    const runs = new Map<string, EgressRun>();
    const uid = (n: number) => `44444444-4444-4444-8444-${String(n).padStart(12, '0')}`;
    // Namespace a's 6 runs, two lookups each, would take 12 threads, more than the pool; its share here is 4.
    for (let i = 0; i < 6; i++) runs.set(uid(i), { namespace: 'tenant-a', name: `run-${i}`, uid: uid(i), allow });
    runs.set(uid(99), { namespace: 'tenant-b', name: 'other', uid: uid(99), allow });
    const proxy = createEgressProxyServer({
      egressKey: KEY,
      policy: { allowEgress: allow, allowPrivateDestinations: allow, apiServer: [] },
      lookupRun: (id) => runs.get(id),
      resolve,
      record: () => undefined,
      lookupLimits: { perRun: LOOKUPS_PER_RUN, perNamespace: 4 },
    });
    const proxyPort = await listen(proxy as unknown as Server);
    const connectTo = (id: string, host: string) =>
      exchange(proxyPort, `CONNECT ${host}:${port} HTTP/1.1\r\nProxy-Authorization: ${auth(id)}\r\n\r\n`, (text) =>
        text.includes('\r\n\r\n'),
      );
    for (let i = 0; i < 6; i++) for (let j = 0; j < 3; j++) void connectTo(uid(i), `x${i}-${j}.slow.test`).catch(() => undefined);
    await expect.poll(() => started.length, { timeout: 2_000 }).toBe(4);
    await new Promise((wait) => setTimeout(wait, 200));
    // Namespace a holds its share and no more (its runs' other lookups wait): the pool has threads left.
    expect(busy).toBe(4);
    expect(await connectTo(uid(99), 'fast.test')).toMatch(/^HTTP\/1\.1 200 /);
    expect(started).toContain('fast.test');
  });

  it('closes a refused CONNECT whose client never hangs up', async () => {
    const { port } = await destination();
    const proxyPort = await startProxy(port, 200);
    const proxy = servers.at(-1)!;
    const answer = await new Promise<string>((resolve) => {
      // allowHalfOpen: this client never sends its FIN, as a hostile one would not.
      const socket = connect({ port: proxyPort, host: '127.0.0.1', allowHalfOpen: true });
      sockets.push(socket);
      let text = '';
      socket.on('data', (data: Buffer) => (text += data.toString('latin1')));
      socket.on('end', () => resolve(text));
      socket.write(`CONNECT forbidden.example:443 HTTP/1.1\r\nProxy-Authorization: ${auth(RUN_A)}\r\n\r\n`);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    const open = () => new Promise<number>((resolve) => proxy.getConnections((_error, count) => resolve(count)));
    await expect.poll(open, { timeout: 2_000 }).toBe(0);
  });

  it('opens no connection for a CONNECT whose client hung up while its name was looked up', async () => {
    // A destination that never hangs up itself, not even when the proxy does (half-open), as a
    // hostile run's own host would not.
    const held: Socket[] = [];
    const port = await listen(
      createServer({ allowHalfOpen: true }, (socket) => {
        held.push(socket);
        socket.on('error', () => undefined);
      }),
    );
    const slowLookup = (host: string) =>
      new Promise<string[]>((resolve) => setTimeout(() => resolve(host.endsWith('.test') ? ['127.0.0.1'] : []), 100));
    const proxyPort = await startProxy(port, undefined, slowLookup);
    for (let i = 0; i < 20; i++) {
      const socket = connect(proxyPort, '127.0.0.1');
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.end(`CONNECT allowed.test:${port} HTTP/1.1\r\nProxy-Authorization: ${auth(RUN_A)}\r\n\r\n`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20 * 100 + 500));
    expect(held.filter((socket) => !socket.destroyed)).toHaveLength(0);
  });

  it(`refuses a run its ${OPEN_PER_RUN + 1}th open tunnel (429 too-many-open), while another run still gets through`, async () => {
    const { port } = await destination();
    const proxyPort = await startProxy(port);
    const tunnel = (uid: string) =>
      new Promise<{ head: string; socket: Socket }>((resolve, reject) => {
        const socket = connect(proxyPort, '127.0.0.1');
        sockets.push(socket);
        let text = '';
        socket.on('data', (data: Buffer) => {
          text += data.toString('latin1');
          if (text.includes('\r\n\r\n')) resolve({ head: text, socket });
        });
        socket.on('error', reject);
        socket.write(`CONNECT allowed.test:${port} HTTP/1.1\r\nProxy-Authorization: ${auth(uid)}\r\n\r\n`);
      });
    const opened = [];
    for (let i = 0; i < OPEN_PER_RUN; i++) opened.push(await tunnel(RUN_A));
    expect(opened.every(({ head }) => head.startsWith('HTTP/1.1 200 '))).toBe(true);
    const beyond = await tunnel(RUN_A);
    expect(beyond.head).toMatch(/^HTTP\/1\.1 429 /);
    expect(beyond.head).toContain('x-chamvi-egress-rule: too-many-open');
    expect((await tunnel(RUN_B)).head).toMatch(/^HTTP\/1\.1 200 /);
    // A tunnel closed gives its place back.
    opened[0]!.socket.destroy();
    await expect.poll(async () => (await tunnel(RUN_A)).head.slice(0, 12), { timeout: 2_000 }).toBe('HTTP/1.1 200');
  });

  it(`counts CONNECTs waiting on a name server that never answers against the ${OPEN_PER_RUN} a run may hold: the next is refused 429`, async () => {
    const { port } = await destination();
    // Names under stall.test are never answered; the others as usual.
    const proxyPort = await startProxy(port, undefined, (host) =>
      host.startsWith('stall.') ? new Promise<string[]>(() => {}) : Promise.resolve(['127.0.0.1']),
    );
    const ask = (uid: string, host: string) => {
      const socket = connect(proxyPort, '127.0.0.1');
      sockets.push(socket);
      let text = '';
      socket.on('data', (data: Buffer) => (text += data.toString('latin1')));
      socket.on('error', () => undefined);
      socket.write(`CONNECT ${host}:${port} HTTP/1.1\r\nProxy-Authorization: ${auth(uid)}\r\n\r\n`);
      return () => text;
    };
    const waiting = Array.from({ length: OPEN_PER_RUN }, () => ask(RUN_A, 'stall.test'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(waiting.every((answer) => answer() === '')).toBe(true);
    const beyond = ask(RUN_A, 'stall.test');
    await expect.poll(beyond, { timeout: 2_000 }).toMatch(/^HTTP\/1\.1 429 [\s\S]*x-chamvi-egress-rule: too-many-open/);
    // Another run is not held up by them.
    const other = ask(RUN_B, 'allowed.test');
    await expect.poll(other, { timeout: 2_000 }).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("closes a run's open tunnels once the run is no longer served (it ended), and leaves another run's", async () => {
    const held: Socket[] = [];
    const port = await listen(
      createServer((socket) => {
        held.push(socket);
        socket.on('error', () => undefined);
      }),
    );
    const proxyPort = await startProxy(port, undefined, undefined, 50);
    const open = (uid: string) =>
      new Promise<Socket>((resolve, reject) => {
        const socket = connect(proxyPort, '127.0.0.1');
        sockets.push(socket);
        socket.once('data', () => resolve(socket));
        socket.on('error', reject);
        socket.write(`CONNECT allowed.test:${port} HTTP/1.1\r\nProxy-Authorization: ${auth(uid)}\r\n\r\n`);
      });
    const ended = await open(RUN_A);
    const other = await open(RUN_B);
    liveRuns.delete(RUN_A);
    await new Promise((resolve) => ended.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(other.destroyed).toBe(false);
    expect(held.filter((socket) => !socket.destroyed)).toHaveLength(1);
  });
});
