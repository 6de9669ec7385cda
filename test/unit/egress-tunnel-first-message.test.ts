// A tunnel's first message gathered from the client's writes (tunnel-first-message.ts): what it
// reads as, however the client cut it, and how often it is read whole: a line sent a byte per
// write is read a few times, not once per byte (which cost 5.5 s of the shared event loop per
// tunnel). Also the PROXY protocol header it looks for (proxy-protocol-header.ts).
import { describe, expect, it } from 'vitest';
import { REQUEST_LINE_MAX_BYTES } from '../../operator/src/egress/http-request-line.ts';
import { readProxyProtocolHeader } from '../../operator/src/egress/proxy-protocol-header.ts';
import { TunnelFirstMessage, type TunnelFirstMessageReading } from '../../operator/src/egress/tunnel-first-message.ts';
import { capturedClientHello } from '../support/captured-client-hello.ts';

const PROXY_V1 = Buffer.from('PROXY TCP4 127.0.0.1 10.0.0.2 1234 8080\r\n', 'latin1');
const PROXY_V2 = Buffer.concat([
  Buffer.from('0d0a0d0a000d0a515549540a', 'hex'),
  Buffer.from([0x21, 0x11, 0, 12, 127, 0, 0, 1, 10, 0, 0, 2, 4, 210, 31, 144]),
]);
const REQUEST = Buffer.from('GET /admin HTTP/1.1\r\nHost: other-site.internal\r\n\r\n', 'latin1');

/** Pushes `bytes` in pieces of `size` until the message is whole; the reading, the pieces pushed, and the scans. */
function feed(bytes: Buffer, size = 1) {
  const message = new TunnelFirstMessage();
  let reading: TunnelFirstMessageReading = { kind: 'incomplete' };
  let pushes = 0;
  for (let at = 0; at < bytes.length && reading.kind === 'incomplete'; at += size) {
    reading = message.push(bytes.subarray(at, at + size));
    pushes++;
  }
  return { reading, pushes, scans: message.scans };
}

describe('TunnelFirstMessage', () => {
  // Client-first protocols whose first message has no line end and then wait for the answer:
  // held for a line end, they hung until the idle timeout.
  it.each([
    ['a Postgres SSLRequest', Buffer.from('0000000804d2162f', 'hex')],
    [
      'a Postgres startup message',
      Buffer.concat([Buffer.from('0000002900030000', 'hex'), Buffer.from('user\0app\0database\0app\0\0', 'latin1')]),
    ],
    ['a git daemon request', Buffer.from('0033git-upload-pack /project.git\0host=git.test\0', 'latin1')],
    ['a binary first byte', Buffer.from([0x80, 0x01, 0x02, 0x03])],
    // A token byte then a space, as a request starts, then a byte no target starts with.
    [
      'an LDAP simple bind',
      Buffer.concat([
        Buffer.from('30200201016016020103040763', 'hex'),
        Buffer.from('n=admin', 'latin1'),
        Buffer.from('8006', 'hex'),
        Buffer.from('secret', 'latin1'),
      ]),
    ],
  ])('settles %s as not HTTP as soon as a byte shows it, whole or a byte per write', (_name, bytes) => {
    for (const size of [bytes.length, 1]) {
      const { reading, pushes } = feed(bytes, size);
      expect(reading).toMatchObject({ kind: 'whole', line: 'not-http', proxyHeader: 'none' });
      expect(pushes * size).toBeLessThanOrEqual(bytes.length + size);
    }
  });

  it('reads a request line of nearly 16 KiB sent a byte per write a few times, not once per byte', () => {
    const line = Buffer.from(`GET /${'a'.repeat(REQUEST_LINE_MAX_BYTES - 100)} HTTP/1.1\r\nHost: other.test\r\n\r\n`, 'latin1');
    const { reading, pushes, scans } = feed(line);
    expect(reading).toMatchObject({ kind: 'whole', line: 'http-request' });
    expect(pushes).toBe(line.indexOf('\r') + 1);
    expect(scans).toBeLessThanOrEqual(2);
  });

  it(`reads a first line unfinished at ${REQUEST_LINE_MAX_BYTES} bytes, sent a byte per write, once it reaches them`, () => {
    const { reading, pushes, scans } = feed(Buffer.alloc(REQUEST_LINE_MAX_BYTES + 10, 'A'));
    expect(reading).toMatchObject({ kind: 'whole', line: 'http-request' });
    expect(pushes).toBe(REQUEST_LINE_MAX_BYTES);
    expect(scans).toBeLessThanOrEqual(2);
  });

  it('does not read again for each empty line before the first line', () => {
    const { reading, scans } = feed(Buffer.from(`${'\r\n'.repeat(4000)}EHLO mail.test\r\n`, 'latin1'));
    expect(reading).toMatchObject({ kind: 'whole', line: 'not-http' });
    expect(scans).toBeLessThanOrEqual(3);
  });

  it('gives every byte sent, cut anywhere, as one message: an SSH banner goes on as it came', () => {
    const banner = Buffer.from('SSH-2.0-OpenSSH_9.6 Ubuntu-3ubuntu13\r\nrest', 'latin1');
    for (const size of [1, 2, 7, banner.length]) {
      const { reading, pushes } = feed(banner, size);
      expect(reading.kind === 'whole' && reading.bytes.toString('latin1')).toBe(banner.subarray(0, pushes * size).toString('latin1'));
      expect(reading).toMatchObject({ hello: { kind: 'not-tls' }, proxyHeader: 'none', line: 'not-http' });
    }
  });

  it('reads a TLS ClientHello sent a byte per write, with its server name', async () => {
    const hello = await capturedClientHello('allowed.test');
    const { reading, pushes } = feed(hello);
    expect(reading).toMatchObject({ kind: 'whole', hello: { kind: 'client-hello', serverName: 'allowed.test' }, line: 'not-http' });
    expect(pushes).toBe(hello.length);
  });

  it.each([
    ['a PROXY v1 line', PROXY_V1],
    ['a PROXY v2 header', PROXY_V2],
  ])('reads %s followed by an HTTP request as a PROXY header, whole or a byte per write', (_what, header) => {
    for (const size of [1, 3, header.length + REQUEST.length]) {
      expect(feed(Buffer.concat([header, REQUEST]), size).reading).toMatchObject({ kind: 'whole', proxyHeader: 'proxy-protocol' });
    }
  });
});

describe('readProxyProtocolHeader', () => {
  it.each([
    ['a v1 line', 'proxy-protocol', PROXY_V1],
    ['a v1 line cut after its space', 'proxy-protocol', PROXY_V1.subarray(0, 6)],
    ['a v2 header', 'proxy-protocol', PROXY_V2],
    ['the v2 signature alone', 'proxy-protocol', PROXY_V2.subarray(0, 12)],
    ['the start of a v1 line', 'incomplete', Buffer.from('PROX')],
    ['the start of the v2 signature, empty lines and a NUL', 'incomplete', PROXY_V2.subarray(0, 5)],
    ['nothing yet', 'incomplete', Buffer.alloc(0)],
    ['a v1 line in lower case, which servers do not take', 'none', Buffer.from('proxy TCP4 127.0.0.1 10.0.0.2 1 2\r\n')],
    ['a word starting PROXY', 'none', Buffer.from('PROXYCMD x\r\n')],
    ['empty lines and then a request', 'none', Buffer.from('\r\n\r\nGET / HTTP/1.1\r\n')],
    ['an SSH banner', 'none', Buffer.from('SSH-2.0-OpenSSH_9.6\r\n')],
  ] as const)('reads %s as %s', (_what, expected, bytes) => {
    expect(readProxyProtocolHeader(bytes)).toBe(expected);
  });
});
