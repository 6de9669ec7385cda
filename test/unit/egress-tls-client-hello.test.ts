// The TLS server name read from the first bytes of a tunnel (tls-client-hello.ts), on
// ClientHellos that node:tls really sends: whole, cut anywhere, spread over two records, and
// beside bytes of other protocols.
import { describe, expect, it } from 'vitest';
import { readClientHello } from '../../operator/src/egress/tls-client-hello.ts';
import { capturedClientHello as clientHello } from '../support/captured-client-hello.ts';

/** The same handshake message carried by two records, cut at `at` bytes of it. */
function inTwoRecords(record: Buffer, at: number): Buffer {
  const message = record.subarray(5);
  const header = (length: number) => Buffer.from([22, record[1]!, record[2]!, length >> 8, length & 255]);
  return Buffer.concat([header(at), message.subarray(0, at), header(message.length - at), message.subarray(at)]);
}

/** The same ClientHello with one more extension at the end, every length above it grown to match. */
function withExtension(record: Buffer, type: number, data: Buffer): Buffer {
  const extension = Buffer.concat([Buffer.from([type >> 8, type & 255, data.length >> 8, data.length & 255]), data]);
  const grown = Buffer.concat([record, extension]);
  grown.writeUInt16BE(record.readUInt16BE(3) + extension.length, 3);
  grown.writeUIntBE(record.readUIntBE(6, 3) + extension.length, 6, 3);
  // Record header 5, handshake header 4, version 2, random 32; then session id, cipher suites, compression methods.
  let at = 5 + 4 + 2 + 32;
  at += 1 + grown[at]!;
  at += 2 + grown.readUInt16BE(at);
  at += 1 + grown[at]!;
  grown.writeUInt16BE(grown.readUInt16BE(at) + extension.length, at);
  return grown;
}

describe('readClientHello', () => {
  it('reads the server name a TLS client asks for', async () => {
    expect(readClientHello(await clientHello('registry.test'))).toEqual({ kind: 'client-hello', serverName: 'registry.test' });
  });

  it('reads a ClientHello without a server name (a client connecting to an address)', async () => {
    expect(readClientHello(await clientHello())).toEqual({ kind: 'client-hello' });
  });

  it('waits for the rest of a ClientHello cut anywhere', async () => {
    const whole = await clientHello('registry.test');
    for (let length = 1; length < whole.length; length++)
      expect(readClientHello(whole.subarray(0, length))).toEqual({ kind: 'incomplete' });
  });

  it('reads a ClientHello spread over two records, whichever its cut', async () => {
    const whole = await clientHello('registry.test');
    for (const at of [1, 3, 4, 40, whole.length - 6]) {
      expect(readClientHello(inTwoRecords(whole, at))).toEqual({ kind: 'client-hello', serverName: 'registry.test' });
    }
  });

  it.each([
    ['plain HTTP', 'GET / HTTP/1.1\r\nHost: a.test\r\n\r\n'],
    ['an SSH banner', 'SSH-2.0-OpenSSH_9.6\r\n'],
    ['a byte that is no TLS record type', '\x19\x03\x01'],
  ])('leaves %s alone (not TLS)', (_what, text) => {
    expect(readClientHello(Buffer.from(text, 'latin1'))).toEqual({ kind: 'not-tls' });
  });

  it.each([0x00, 0x01, 0x02, 0x0f])(
    'refuses a ClientHello whose record version is %i.x, not 3 (Go serves a first record of any version below 16)',
    async (major) => {
      const hello = Buffer.from(await clientHello('other.test'));
      hello[1] = major;
      expect(readClientHello(hello)).toEqual({ kind: 'malformed', why: `a TLS record of version ${major}.x, which no client sends` });
      expect(readClientHello(hello.subarray(0, 2))).toMatchObject({ kind: 'malformed' });
      expect(readClientHello(hello.subarray(0, 1))).toEqual({ kind: 'incomplete' });
    },
  );

  it('refuses a ClientHello whose second record has a version other than 3', async () => {
    const spread = inTwoRecords(await clientHello('other.test'), 40);
    spread[5 + 40 + 1] = 0;
    expect(readClientHello(spread)).toMatchObject({ kind: 'malformed', why: expect.stringContaining('version 0.x') });
  });

  it('calls malformed a handshake that is not a ClientHello, or a record it cannot be', async () => {
    const whole = await clientHello('registry.test');
    const serverHello = Buffer.from(whole);
    serverHello[5] = 2;
    expect(readClientHello(serverHello)).toMatchObject({ kind: 'malformed' });
    expect(readClientHello(Buffer.from([22, 3, 1, 0x40, 0x01]))).toMatchObject({ kind: 'malformed' });
    const cutByAlert = Buffer.concat([inTwoRecords(whole, 40).subarray(0, 5 + 40), Buffer.from([21, 3, 3, 0, 2, 2, 40])]);
    expect(readClientHello(cutByAlert)).toMatchObject({ kind: 'malformed' });
  });

  it.each([
    ['a warning alert', [21, 3, 1, 0, 2, 1, 90], 'an alert record'],
    ['a warning alert of version 0.1', [21, 0, 1, 0, 2, 1, 90], 'an alert record'],
    ['a change_cipher_spec', [20, 3, 3, 0, 1, 1], 'a change_cipher_spec record'],
    ['application data', [23, 3, 3, 0, 1, 0], 'an application_data record'],
    ['a heartbeat of version 0.0', [24, 0, 0, 0, 1, 1], 'a heartbeat record'],
  ])('refuses TLS that starts with %s before its ClientHello (a server may skip it and read the hello)', async (_what, first, why) => {
    const tls = Buffer.concat([Buffer.from(first), await clientHello('other.test')]);
    expect(readClientHello(tls)).toEqual({ kind: 'malformed', why: `the tunnel's TLS starts with ${why}, not a ClientHello` });
    expect(readClientHello(tls.subarray(0, 1))).toEqual({
      kind: 'malformed',
      why: `the tunnel's TLS starts with ${why}, not a ClientHello`,
    });
  });

  it('refuses a ClientHello with Encrypted Client Hello, whatever its outer server name', async () => {
    const hello = await clientHello('registry.test');
    expect(readClientHello(withExtension(hello, 0x1234, Buffer.from([1, 2, 3])))).toEqual({
      kind: 'client-hello',
      serverName: 'registry.test',
    });
    expect(readClientHello(withExtension(hello, 0xfe0d, Buffer.alloc(32, 7)))).toMatchObject({
      kind: 'malformed',
      why: expect.stringContaining('Encrypted Client Hello'),
    });
  });
});
