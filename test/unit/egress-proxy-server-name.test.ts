// A CONNECT tunnel carries TLS to the host it was opened to only (egress-proxy-server.ts with
// tls-client-hello.ts): the ClientHello's server name is read before a byte goes on, and a
// tunnel asking for another site behind the same address, or for none when its host has a dot,
// is closed and audited as refused.
// Nor does a tunnel carry plain HTTP, on any port (http-request-line.ts): its request line is
// read before a byte goes on, as the client's own Host would pick the site.
import { connect, createServer, type Server } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { createEgressProxyServer, type EgressConnection } from '../../operator/src/egress/egress-proxy-server.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';
import { proxyToken } from '../../operator/src/egress/proxy-credential.ts';
import { readClientHello } from '../../operator/src/egress/tls-client-hello.ts';
import { capturedClientHello } from '../support/captured-client-hello.ts';
import { loopbackServers } from '../support/loopback-servers.ts';

const KEY = 'unit-egress-key-0123456789abcdef0123456789abcdef';
const UID = '22222222-2222-4222-8222-222222222222';
const AUTH = `Basic ${Buffer.from(`${UID}:${proxyToken(KEY, UID)}`).toString('base64')}`;

const { listen, track } = loopbackServers();

/** A destination (standing in for a CDN's shared address) that keeps every byte it receives. */
async function start() {
  const received: Buffer[] = [];
  const destinationPort = await listen(
    createServer((socket) => {
      track(socket);
      socket.on('data', (data: Buffer) => received.push(data));
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

  it('passes on another protocol that is not TLS (an SSH banner), byte for byte', async () => {
    const { destinationPort, proxyPort, received } = await start();
    const banner = 'SSH-2.0-OpenSSH_9.6 Ubuntu-3ubuntu13\r\n';
    await bytesThroughTunnel(proxyPort, destinationPort, Buffer.from(banner, 'latin1'));
    await expect.poll(() => received().toString('latin1'), { timeout: 5_000 }).toBe(banner);
  });
});
