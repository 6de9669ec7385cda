// A CONNECT tunnel carries TLS to the host it was opened to only (egress-proxy-server.ts with
// tls-client-hello.ts): the ClientHello's server name is read before a byte goes on, and a
// tunnel asking for another site behind the same address, or for none when its host has a dot,
// is closed and audited as refused.
// Nor does a tunnel carry plain HTTP, on any port (http-request-line.ts): its request line is
// read before a byte goes on, as the client's own Host would pick the site.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { createEgressProxyServer, type EgressConnection } from '../../operator/src/egress/egress-proxy-server.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';
import { readClientHello } from '../../operator/src/egress/tls-client-hello.ts';
import { createBenchCertificate } from '../bench/bench-certificate.ts';
import { capturedClientHello } from '../support/captured-client-hello.ts';
import { loopbackServers } from '../support/loopback-servers.ts';

const KEY = 'unit-egress-key-0123456789abcdef0123456789abcdef';
const UID = '22222222-2222-4222-8222-222222222222';
const AUTH = `Basic ${Buffer.from(`${UID}:${proxyToken(KEY, UID)}`).toString('base64')}`;

const { listen, track } = loopbackServers();

/**
 * A destination (standing in for a CDN's shared address) that keeps every byte it receives, and
 * answers them as `answer` says (nothing unless given).
 */
async function start(answer?: (socket: Socket, data: Buffer) => void) {
  const received: Buffer[] = [];
  const destinationPort = await listen(
    createServer((socket) => {
      track(socket);
      socket.on('data', (data: Buffer) => {
        received.push(data);
        answer?.(socket, data);
      });
      socket.on('error', () => undefined);
    }),
  );
  const allow = parseHostPatterns([`allowed.test:${destinationPort}`, `registry:${destinationPort}`]);
  const records: EgressConnection[] = [];
  const proxy = createEgressProxyServer({
    egressKey: KEY,
    policy: { allowEgress: allow, allowPrivateDestinations: allow, apiServer: [] },
    lookupRun: (uid) => (uid === UID ? { namespace: 'unit', name: 'sni', uid, allow } : undefined),
    resolve: () => Promise.resolve(['127.0.0.1']),
    record: (connection) => records.push(connection),
  });
  const proxyPort = await listen(proxy as unknown as Server);
  return { destinationPort, proxyPort, received: () => Buffer.concat(received), records };
}

/**
 * Opens a tunnel to `host` (allowed.test unless given) and starts TLS through it, asking for
 * `servername` (none when undefined), after the bytes `before` when given.
 */
async function tlsThroughTunnel(
  proxyPort: number,
  destinationPort: number,
  servername: string | undefined,
  before?: Buffer,
  host = 'allowed.test',
) {
  const { socket, state } = await openTunnel(proxyPort, destinationPort, host);
  if (before) socket.write(before);
  const tls = tlsConnect({ socket, servername: servername ?? '', rejectUnauthorized: false });
  tls.on('error', () => undefined);
  return state;
}

/** Opens a tunnel to allowed.test and sends `bytes` through it as they are. */
async function bytesThroughTunnel(proxyPort: number, destinationPort: number, bytes: Buffer) {
  const { socket, state } = await openTunnel(proxyPort, destinationPort);
  socket.write(bytes);
  return state;
}

async function openTunnel(proxyPort: number, destinationPort: number, host = 'allowed.test') {
  const socket = connect(proxyPort, '127.0.0.1');
  track(socket);
  socket.on('error', () => undefined);
  socket.write(`CONNECT ${host}:${destinationPort} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
  const head = await new Promise<string>((resolve) => socket.once('data', (data: Buffer) => resolve(data.toString('latin1'))));
  expect(head).toMatch(/^HTTP\/1\.1 200 /);
  const state = { closed: false };
  socket.on('close', () => (state.closed = true));
  return { socket, state };
}

describe('egress proxy: the TLS server name of a tunnel', { timeout: 15_000 }, () => {
  it('closes a tunnel whose TLS server name is another host, before a byte reaches the destination, and audits it refused', async () => {
    const { destinationPort, proxyPort, received, records } = await start();
    const tunnel = await tlsThroughTunnel(proxyPort, destinationPort, 'other.test');
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-mismatch', host: 'allowed.test' });
    expect(records[0]!.message).toContain('"other.test" is not allowed.test');
    expect(received()).toHaveLength(0);
  });

  it('closes a tunnel whose TLS starts with an alert record before its ClientHello, and audits it refused', async () => {
    // Go's crypto/tls skips a warning alert before the ClientHello and then serves the hello's site.
    const { destinationPort, proxyPort, received, records } = await start();
    const tunnel = await tlsThroughTunnel(proxyPort, destinationPort, 'other.test', Buffer.from([21, 3, 1, 0, 2, 1, 90]));
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-mismatch', host: 'allowed.test' });
    expect(records[0]!.message).toContain('starts with an alert record');
    expect(received()).toHaveLength(0);
  });

  it('closes a tunnel whose ClientHello record has version 0.x, naming another host, before a byte goes on', async () => {
    // Go's crypto/tls reads a first record of any version below 0x1000, and served other.test.
    const { destinationPort, proxyPort, received, records } = await start();
    const hello = Buffer.from(await capturedClientHello('other.test'));
    hello[1] = 0x00;
    const tunnel = await bytesThroughTunnel(proxyPort, destinationPort, hello);
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-mismatch', host: 'allowed.test' });
    expect(records[0]!.message).toContain('version 0.x');
    expect(received()).toHaveLength(0);
  });

  it('closes a tunnel whose TLS starts with an alert of version 0.1 before its ClientHello', async () => {
    const { destinationPort, proxyPort, received, records } = await start();
    const alertFirst = Buffer.concat([Buffer.from([0x15, 0x00, 0x01, 0x00, 0x02, 0x01, 0x5a]), await capturedClientHello('other.test')]);
    const tunnel = await bytesThroughTunnel(proxyPort, destinationPort, alertFirst);
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-mismatch', host: 'allowed.test' });
    expect(records[0]!.message).toContain('starts with an alert record');
    expect(received()).toHaveLength(0);
  });

  it('passes on a ClientHello naming the tunnel’s own host, byte for byte', async () => {
    const { destinationPort, proxyPort, received } = await start();
    await tlsThroughTunnel(proxyPort, destinationPort, 'allowed.test');
    await expect.poll(() => readClientHello(received()), { timeout: 5_000 }).toEqual({ kind: 'client-hello', serverName: 'allowed.test' });
  });

  it('closes a tunnel whose ClientHello names no server, before a byte reaches the destination, and audits it sni-missing', async () => {
    // Behind an address whose server picks the site by the Host header inside TLS (an
    // ingress), a hello without a server name reached whichever site that header named.
    const { destinationPort, proxyPort, received, records } = await start();
    const tunnel = await tlsThroughTunnel(proxyPort, destinationPort, undefined);
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-missing', host: 'allowed.test' });
    expect(records[0]!.message).toContain('names no server (SNI)');
    expect(received()).toHaveLength(0);
  });

  it('passes on a ClientHello naming the tunnel’s host in another case, with a final dot, as clients send a host written so', async () => {
    const { destinationPort, proxyPort, received } = await start();
    await tlsThroughTunnel(proxyPort, destinationPort, 'Allowed.TEST.');
    await expect.poll(() => readClientHello(received()), { timeout: 5_000 }).toEqual({ kind: 'client-hello', serverName: 'Allowed.TEST.' });
  });

  it('passes on a ClientHello naming no server through a tunnel to a single-label host, which clients send no name for', async () => {
    const { destinationPort, proxyPort, received } = await start();
    await tlsThroughTunnel(proxyPort, destinationPort, undefined, undefined, 'registry');
    await expect.poll(() => readClientHello(received()), { timeout: 5_000 }).toEqual({ kind: 'client-hello' });
  });

  it('closes a tunnel whose first bytes are an SSLv2-format ClientHello, which names no server, before a byte goes on', async () => {
    // OpenSSL 3 still takes such a hello, and answered it with its default site's certificate.
    const { destinationPort, proxyPort, received, records } = await start();
    const cipherSpecs = Buffer.from('00c02f00009c00002f', 'hex');
    const body = Buffer.concat([Buffer.from([1, 3, 3, 0, cipherSpecs.length, 0, 0, 0, 32]), cipherSpecs, Buffer.alloc(32, 0x5a)]);
    const tunnel = await bytesThroughTunnel(proxyPort, destinationPort, Buffer.concat([Buffer.from([0x80, body.length]), body]));
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-mismatch', host: 'allowed.test' });
    expect(records[0]!.message).toContain('SSLv2-format ClientHello');
    expect(received()).toHaveLength(0);
  });
});

describe('egress proxy: plain HTTP through a tunnel to a port other than 80', { timeout: 15_000 }, () => {
  it('closes a tunnel whose first bytes are an HTTP request, before a byte reaches the destination, and audits it plain-http-tunnel', async () => {
    // An ingress listening for plain HTTP on a listed port picks its site by the client's Host.
    const { destinationPort, proxyPort, received, records } = await start();
    const request = Buffer.from('\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n', 'latin1');
    const tunnel = await bytesThroughTunnel(proxyPort, destinationPort, request);
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'plain-http-tunnel', host: 'allowed.test' });
    expect(received()).toHaveLength(0);
  });

  it('closes a tunnel whose request line came in pieces', async () => {
    const { destinationPort, proxyPort, received, records } = await start();
    const { socket, state } = await openTunnel(proxyPort, destinationPort);
    for (const piece of ['GE', 'T /x', ' HTTP/1', '.1\r\nHost: other.test\r\n\r\n']) {
      socket.write(piece);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await expect.poll(() => state.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ rule: 'plain-http-tunnel' });
    expect(received()).toHaveLength(0);
  });

  it.each([
    ['a PROXY protocol v1 line', Buffer.from('PROXY TCP4 127.0.0.1 10.0.0.2 1234 8080\r\n', 'latin1')],
    [
      'a PROXY protocol v2 header',
      Buffer.concat([
        Buffer.from('0d0a0d0a000d0a515549540a', 'hex'),
        Buffer.from([0x21, 0x11, 0, 12, 127, 0, 0, 1, 10, 0, 0, 2, 4, 210, 31, 144]),
      ]),
    ],
  ])(
    'closes a tunnel that starts with %s (an HTTP request after it), before a byte goes on, and audits it proxy-protocol-tunnel',
    async (_what, header) => {
      // A server taking PROXY headers believes the source address in it, and the request after it
      // is plain HTTP that the first line alone did not show.
      const { destinationPort, proxyPort, received, records } = await start();
      const request = Buffer.from('GET /admin HTTP/1.1\r\nHost: other-site.internal\r\n\r\n', 'latin1');
      const tunnel = await bytesThroughTunnel(proxyPort, destinationPort, Buffer.concat([header, request]));
      await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
      await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
      expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'proxy-protocol-tunnel', host: 'allowed.test' });
      expect(received()).toHaveLength(0);
    },
  );

  it('closes a tunnel whose PROXY v1 line came a byte at a time', async () => {
    const { destinationPort, proxyPort, received, records } = await start();
    const { socket, state } = await openTunnel(proxyPort, destinationPort);
    for (const byte of 'PROXY TCP4 127.0.0.1 10.0.0.2 1234 8080\r\n') {
      socket.write(byte);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await expect.poll(() => state.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ rule: 'proxy-protocol-tunnel' });
    expect(received()).toHaveLength(0);
  });

  it('passes on another protocol that is not TLS (an SSH banner), byte for byte', async () => {
    const { destinationPort, proxyPort, received } = await start();
    const banner = 'SSH-2.0-OpenSSH_9.6 Ubuntu-3ubuntu13\r\n';
    await bytesThroughTunnel(proxyPort, destinationPort, Buffer.from(banner, 'latin1'));
    await expect.poll(() => received().toString('latin1'), { timeout: 5_000 }).toBe(banner);
  });
});

/** Postgres's SSLRequest (length 8, code 80877103), which a server answers `S` before TLS starts. */
const SSL_REQUEST = Buffer.from('0000000804d2162f', 'hex');

/** A Postgres server's answer to an SSLRequest, `S`: go on with TLS (its bytes are kept all the same). */
const answerSslRequest = (socket: Socket, data: Buffer) => {
  if (data.subarray(0, 8).equals(SSL_REQUEST)) socket.write('S');
};

/** Opens a tunnel to allowed.test, sends an SSLRequest and waits for its `S`. */
async function sslRequestThroughTunnel(proxyPort: number, destinationPort: number) {
  const { socket, state } = await openTunnel(proxyPort, destinationPort);
  socket.write(SSL_REQUEST);
  const answer = await new Promise<string>((resolve) => socket.once('data', (data: Buffer) => resolve(data.toString('latin1'))));
  expect(answer).toBe('S');
  return { socket, state };
}

describe('egress proxy: TLS started after other bytes (Postgres SSLRequest, STARTTLS)', { timeout: 15_000 }, () => {
  it('closes a tunnel whose ClientHello after an answered SSLRequest names another host, before the hello reaches the destination', async () => {
    // Neon's proxy routes by the server name: the tunnel to a listed endpoint reached another's database.
    const { destinationPort, proxyPort, received, records } = await start(answerSslRequest);
    const { socket, state } = await sslRequestThroughTunnel(proxyPort, destinationPort);
    const tls = tlsConnect({ socket, servername: 'ep-attacker.test', rejectUnauthorized: false });
    tls.on('error', () => undefined);
    await expect.poll(() => state.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ kind: 'connect', allowed: false, rule: 'sni-mismatch', host: 'allowed.test' });
    expect(records[0]!.message).toContain('"ep-attacker.test" is not allowed.test');
    expect(received()).toEqual(SSL_REQUEST);
  });

  it('closes it when the SSLRequest and the ClientHello come in one write, none of which goes on', async () => {
    // The server reads 8 bytes, answers, then reads the hello from what it has already received.
    const { destinationPort, proxyPort, received, records } = await start(answerSslRequest);
    const tunnel = await bytesThroughTunnel(
      proxyPort,
      destinationPort,
      Buffer.concat([SSL_REQUEST, await capturedClientHello('other.test')]),
    );
    await expect.poll(() => tunnel.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ allowed: false, rule: 'sni-mismatch' });
    expect(received()).toHaveLength(0);
  });

  it('closes it when the ClientHello after the SSLRequest comes in two writes, holding its first part', async () => {
    const { destinationPort, proxyPort, received, records } = await start(answerSslRequest);
    const { socket, state } = await sslRequestThroughTunnel(proxyPort, destinationPort);
    const hello = await capturedClientHello('other.test');
    socket.write(hello.subarray(0, 60));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(received()).toEqual(SSL_REQUEST);
    socket.write(hello.subarray(60));
    await expect.poll(() => state.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ allowed: false, rule: 'sni-mismatch' });
    expect(received()).toEqual(SSL_REQUEST);
  });

  it('sends nothing of a ClientHello whose client hangs up before it is whole, and closes the tunnel', async () => {
    const { destinationPort, proxyPort, received } = await start(answerSslRequest);
    const { socket, state } = await sslRequestThroughTunnel(proxyPort, destinationPort);
    socket.end((await capturedClientHello('allowed.test')).subarray(0, 60));
    await expect.poll(() => state.closed, { timeout: 5_000 }).toBe(true);
    expect(received()).toEqual(SSL_REQUEST);
  });

  it('carries a Postgres client’s TLS after its SSLRequest when it names the tunnel’s host, both ways', async () => {
    const certificate = createBenchCertificate(['allowed.test']);
    try {
      const { destinationPort, proxyPort, records } = await start((socket, data) => {
        if (!data.equals(SSL_REQUEST)) return;
        socket.removeAllListeners('data');
        socket.write('S');
        const tls = new TLSSocket(socket, { isServer: true, cert: certificate.cert, key: certificate.key });
        tls.on('error', () => undefined);
        tls.on('data', (query: Buffer) => tls.write(`answer to ${query.toString()}`));
      });
      const { socket } = await sslRequestThroughTunnel(proxyPort, destinationPort);
      const tls = tlsConnect({ socket, servername: 'allowed.test', ca: certificate.cert });
      await new Promise<void>((resolve, reject) => tls.once('secureConnect', resolve).once('error', reject));
      tls.write('SELECT 1');
      const answer = await new Promise<string>((resolve) => tls.once('data', (data: Buffer) => resolve(data.toString())));
      expect(answer).toBe('answer to SELECT 1');
      tls.destroy();
      await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
      expect(records[0]).toMatchObject({ kind: 'connect', allowed: true, host: 'allowed.test' });
    } finally {
      certificate.remove();
    }
  });

  it('closes a tunnel whose ClientHello after an SSLRequest comes in 13 records of version 3.5 (servers read any number), none of it sent', async () => {
    const { destinationPort, proxyPort, received, records } = await start(answerSslRequest);
    const { socket, state } = await sslRequestThroughTunnel(proxyPort, destinationPort);
    const message = (await capturedClientHello('other.test')).subarray(5);
    const fragments = Array.from({ length: Math.ceil(message.length / 10) }, (_, index) => message.subarray(index * 10, index * 10 + 10));
    expect(fragments.length).toBeGreaterThan(8);
    socket.write(Buffer.concat(fragments.flatMap((fragment) => [Buffer.from([22, 3, 5, 0, fragment.length]), fragment])));
    await expect.poll(() => state.closed, { timeout: 5_000 }).toBe(true);
    await expect.poll(() => records.length, { timeout: 5_000 }).toBe(1);
    expect(records[0]).toMatchObject({ allowed: false, rule: 'sni-mismatch' });
    expect(received()).toEqual(SSL_REQUEST);
  });

  it('passes on a MySQL client executing a prepared statement 100 times, whose every packet starts like a TLS handshake record', async () => {
    // COM_STMT_EXECUTE of statement 1 with one BIGINT: `16 00 00 00 17 01 00 00 00 ...`.
    const { destinationPort, proxyPort, received, records } = await start();
    const { socket, state } = await openTunnel(proxyPort, destinationPort);
    const login = Buffer.concat([Buffer.from([76, 0, 0, 1]), Buffer.alloc(76, 0x41)]);
    const packets = [login];
    for (let value = 0; value < 100; value++) {
      const execute = Buffer.alloc(26);
      execute.writeUIntLE(22, 0, 3);
      execute[4] = 0x17;
      execute.writeUInt32LE(1, 5);
      execute.writeUInt32LE(1, 10);
      execute[15] = 1;
      execute[16] = 8;
      execute.writeBigUInt64LE(BigInt(value), 18);
      packets.push(execute);
    }
    for (const packet of packets) socket.write(packet);
    const sent = Buffer.concat(packets);
    await expect.poll(() => received().equals(sent), { timeout: 5_000 }).toBe(true);
    expect(state.closed).toBe(false);
    expect(records).toHaveLength(0);
  });

  it('passes on a plaintext protocol (Redis), byte for byte, and the destination’s answer back', async () => {
    const { destinationPort, proxyPort, received } = await start((socket) => socket.write('+PONG\r\n'));
    const { socket } = await openTunnel(proxyPort, destinationPort);
    const commands = Buffer.concat([
      Buffer.from('*1\r\n$4\r\nPING\r\n'),
      // A value holding a TLS record that starts a ClientHello and is followed by no record: only a whole hello counts.
      Buffer.from('*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$13\r\n'),
      Buffer.from('16030100080100005000000000', 'hex'),
      Buffer.from('\r\n'),
    ]);
    const answer = new Promise<string>((resolve) => socket.once('data', (data: Buffer) => resolve(data.toString())));
    socket.write(commands);
    expect(await answer).toBe('+PONG\r\n');
    await expect.poll(() => received().equals(commands), { timeout: 5_000 }).toBe(true);
  });
});
