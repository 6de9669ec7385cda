// The egress proxy's data path (issue #12), on real loopback sockets: the production server
// (egress-proxy-server.ts) in this process, a destination that sends and receives known bytes,
// and a client that reads slowly, so the proxy's writes toward it back up and its reads from
// the destination must wait. Every byte must arrive, in order, and the audit record must count
// exactly the bytes that moved each way.
import { createHash, randomBytes } from 'node:crypto';
import { createServer as createHttpServer, request, type Server as HttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import type { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createEgressProxyServer, type EgressConnection } from '../../operator/src/egress/egress-proxy-server.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';

const KEY = 'unit-egress-key-0123456789abcdef0123456789abcdef';
const UID = '22222222-2222-4222-8222-222222222222';
const AUTH = `Basic ${Buffer.from(`${UID}:${proxyToken(KEY, UID)}`).toString('base64')}`;
const DOWNLOAD = randomBytes(24 * 1024 * 1024 + 12_345);
const UPLOAD = randomBytes(3 * 1024 * 1024 + 678);
// Not a TLS record's first byte: the proxy reads a tunnel's first bytes as a ClientHello when
// they look like one (tls-client-hello.ts), and random bytes would, once in 65 536 runs.
UPLOAD[0] = 0x2a;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

const servers: (Server | HttpServer)[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function listen<T extends Server | HttpServer>(server: T): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function startProxy(
  destinationPort: number,
  timeouts: { connectTimeoutMs?: number; idleTimeoutMs?: number } = {},
): Promise<{ port: number; records: EgressConnection[] }> {
  const allow = parseHostPatterns([`destination.test:${destinationPort}`]);
  const run = { namespace: 'unit', name: 'data-path', uid: UID, allow };
  const records: EgressConnection[] = [];
  const proxy = createEgressProxyServer({
    egressKey: KEY,
    policy: { allowEgress: allow, allowPrivateDestinations: allow, apiServer: [] },
    lookupRun: (uid) => (uid === UID ? run : undefined),
    resolve: (host) => Promise.resolve(host === 'destination.test' ? ['127.0.0.1'] : []),
    record: (connection) => records.push(connection),
    ...timeouts,
  });
  return { port: await listen(proxy), records };
}

/** A plain HTTP GET through the proxy: its status and body. */
function getThrough(proxyPort: number, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: proxyPort, path: url, headers: { 'proxy-authorization': AUTH } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Everything a socket receives, read in small bites with pauses (a slow client). */
function readSlowly(socket: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let sinceBreak = 0;
    socket.on('data', (data: Buffer) => {
      chunks.push(data);
      sinceBreak += data.length;
      if (sinceBreak >= 2 * 1024 * 1024) {
        sinceBreak = 0;
        socket.pause();
        setTimeout(() => socket.resume(), 20);
      }
    });
    socket.once('end', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
    socket.resume();
  });
}

const recorded = async (records: EgressConnection[]) => {
  await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
  return records[0]!;
};

describe('egress proxy data path', () => {
  it('relays a CONNECT tunnel byte for byte both ways to a slow client and audits the exact counts', async () => {
    let uploaded: Promise<Buffer> = Promise.reject(new Error('no connection'));
    uploaded.catch(() => undefined);
    const destinationPort = await listen(
      createServer((socket) => {
        uploaded = new Promise((resolve) => {
          const chunks: Buffer[] = [];
          socket.on('data', (data: Buffer) => chunks.push(data));
          socket.once('end', () => resolve(Buffer.concat(chunks)));
        });
        socket.end(DOWNLOAD);
      }),
    );
    const proxy = await startProxy(destinationPort);

    const client = connect(proxy.port, '127.0.0.1');
    client.write(`CONNECT destination.test:${destinationPort} HTTP/1.1\r\nHost: destination.test\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    const answer = await new Promise<Buffer>((resolve) => client.once('data', resolve));
    const established = 'HTTP/1.1 200 Connection Established\r\n\r\n';
    expect(answer.subarray(0, established.length).toString()).toBe(established);
    client.pause();
    if (answer.length > established.length) client.unshift(answer.subarray(established.length));
    const received = readSlowly(client);
    client.end(UPLOAD);

    const download = await received;
    expect(download.length).toBe(DOWNLOAD.length);
    expect(sha256(download)).toBe(sha256(DOWNLOAD));
    expect(sha256(await uploaded)).toBe(sha256(UPLOAD));
    const record = await recorded(proxy.records);
    expect(record).toMatchObject({ kind: 'connect', allowed: true, bytesSent: UPLOAD.length, bytesReceived: DOWNLOAD.length });
  });

  it('closes the destination and audits once when the sandbox hangs up in the middle of a download', async () => {
    let destinationClosed: Promise<void> = new Promise(() => undefined);
    const destinationPort = await listen(
      createServer((socket) => {
        destinationClosed = new Promise((resolve) => socket.once('close', () => resolve()));
        socket.on('error', () => undefined);
        // More than the sockets between here and the client can hold: the proxy's reads pause.
        socket.write(DOWNLOAD);
      }),
    );
    const proxy = await startProxy(destinationPort);

    const client = connect(proxy.port, '127.0.0.1');
    client.write(`CONNECT destination.test:${destinationPort} HTTP/1.1\r\nHost: destination.test\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    let received = 0;
    await new Promise<void>((resolve) =>
      client.on('data', (data: Buffer) => {
        received += data.length;
        if (received >= 1024 * 1024) resolve();
      }),
    );
    client.destroy();

    await destinationClosed;
    const record = await recorded(proxy.records);
    expect(record.bytesReceived).toBeGreaterThanOrEqual(received - 64);
    expect(record.bytesReceived).toBeLessThan(DOWNLOAD.length);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(proxy.records).toHaveLength(1);
  });

  it('forwards a plain HTTP request body and response byte for byte and audits the exact body counts', async () => {
    let uploaded = Buffer.alloc(0);
    const destinationPort = await listen(
      createHttpServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (data: Buffer) => chunks.push(data));
        req.on('end', () => {
          uploaded = Buffer.concat(chunks);
          res.writeHead(200, { 'content-length': DOWNLOAD.length }).end(DOWNLOAD);
        });
      }),
    );
    const proxy = await startProxy(destinationPort);

    const download = await new Promise<Buffer>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: proxy.port,
          method: 'POST',
          path: `http://destination.test:${destinationPort}/upload`,
          headers: { 'proxy-authorization': AUTH, 'content-length': UPLOAD.length },
        },
        (res) => {
          expect(res.statusCode).toBe(200);
          readSlowly(res).then(resolve, reject);
        },
      );
      req.on('error', reject);
      req.end(UPLOAD);
    });

    expect(download.length).toBe(DOWNLOAD.length);
    expect(sha256(download)).toBe(sha256(DOWNLOAD));
    expect(sha256(uploaded)).toBe(sha256(UPLOAD));
    const record = await recorded(proxy.records);
    expect(record).toMatchObject({ kind: 'http', allowed: true, bytesSent: UPLOAD.length, bytesReceived: DOWNLOAD.length });
  });

  // A destination slower to answer than the connect may take (a registry building an index).
  const answeringAfter = (ms: number) =>
    createHttpServer((_req, res) => {
      setTimeout(() => res.end('answered'), ms);
    });

  it('waits longer than connectTimeoutMs for a plain HTTP answer once connected, on a new and on a reused connection', async () => {
    const destination = answeringAfter(1_500);
    let connections = 0;
    destination.on('connection', () => connections++);
    const destinationPort = await listen(destination);
    const proxy = await startProxy(destinationPort, { connectTimeoutMs: 1_000 });
    const url = `http://destination.test:${destinationPort}/slow`;
    expect(await getThrough(proxy.port, url)).toEqual({ status: 200, body: 'answered' });
    // The second goes over the connection the run's agent kept.
    expect(await getThrough(proxy.port, url)).toEqual({ status: 200, body: 'answered' });
    expect(connections).toBe(1);
  });

  it('still gives up on a plain HTTP destination silent for longer than idleTimeoutMs', async () => {
    const destinationPort = await listen(answeringAfter(1_500));
    const proxy = await startProxy(destinationPort, { connectTimeoutMs: 5_000, idleTimeoutMs: 300 });
    const answer = await getThrough(proxy.port, `http://destination.test:${destinationPort}/slow`);
    expect(answer.status).toBe(502);
  });
});
