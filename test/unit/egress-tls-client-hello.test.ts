// The TLS server name read from the first bytes of a tunnel (tls-client-hello.ts), on
// ClientHellos that node:tls really sends: whole, cut anywhere, spread over two records, and
// beside bytes of other protocols, some of which start with a TLS record type by chance.
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
  const at = extensionsLengthAt(grown);
  grown.writeUInt16BE(grown.readUInt16BE(at) + extension.length, at);
  return grown;
}

/** Where a ClientHello record holds the length of its extensions. */
function extensionsLengthAt(record: Buffer): number {
  // Record header 5, handshake header 4, version 2, random 32; then session id, cipher suites, compression methods.
  let at = 5 + 4 + 2 + 32;
  at += 1 + record[at]!;
  at += 2 + record.readUInt16BE(at);
  at += 1 + record[at]!;
  return at;
}

/** The data of a server_name extension listing `names` ([name type, name]), its list length as given or its own. */
function serverNameList(names: readonly (readonly [number, string])[], listLength?: number): Buffer {
  const entries = Buffer.concat(
    names.map(([type, name]) => {
      const bytes = Buffer.from(name, 'latin1');
      return Buffer.concat([Buffer.from([type, bytes.length >> 8, bytes.length & 255]), bytes]);
    }),
  );
  const length = listLength ?? entries.length;
  return Buffer.concat([Buffer.from([length >> 8, length & 255]), entries]);
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

  /** A MongoDB OP_MSG header (its int32 length little-endian, request id, response to, op code 2013) and a body. */
  function mongoMessage(length: number, requestId: number): Buffer {
    const message = Buffer.alloc(length);
    message.writeInt32LE(length, 0);
    message.writeInt32LE(requestId, 4);
    message.writeInt32LE(0, 8);
    message.writeInt32LE(2013, 12);
    Buffer.from('\x10\x00\x00\x00\x10hello\x00\x01\x00\x00\x00\x00', 'latin1').copy(message, 21);
    return message;
  }

  // 276, 278, 280, 534 bytes start 14 01, 16 01, 18 01, 16 02: a TLS record type and a version.
  it.each([276, 278, 280, 534])('leaves a MongoDB message of %i bytes alone (not TLS), whatever its request id', (length) => {
    for (const requestId of [0, 1, 2, 7, 22, 0xff, 0x100, 0x101, 0x116, 0x1ff, 0x1234, 0xffff])
      expect(readClientHello(mongoMessage(length, requestId)), `request id ${requestId}`).toEqual({ kind: 'not-tls' });
  });

  /** An SSLv2-format ClientHello of version 3.`minor`, as a TLS 1.2 client with SSLv2Hello sends it: three cipher specs, a 32-byte challenge. */
  function sslV2ClientHello(minor: number): Buffer {
    const cipherSpecs = Buffer.from('00c02f00009c00002f', 'hex');
    const body = Buffer.concat([Buffer.from([1, 3, minor, 0, cipherSpecs.length, 0, 0, 0, 32]), cipherSpecs, Buffer.alloc(32, 0x5a)]);
    return Buffer.concat([Buffer.from([0x80 | (body.length >> 8), body.length & 255]), body]);
  }

  // OpenSSL 3 answered one with its default certificate: it has no extensions, so no server name.
  it.each([0, 1, 3])('refuses an SSLv2-format ClientHello of version 3.%i, once its three lengths are in', (minor) => {
    const hello = sslV2ClientHello(minor);
    const refused = { kind: 'malformed', why: expect.stringContaining('an SSLv2-format ClientHello, which carries no server name') };
    expect(readClientHello(hello)).toEqual(refused);
    expect(readClientHello(hello.subarray(0, 11))).toEqual(refused);
    for (let length = 1; length < 11; length++) expect(readClientHello(hello.subarray(0, length))).toEqual({ kind: 'incomplete' });
  });

  /** An ONC RPC (NFS) call whose record mark says last fragment, 259 bytes: 80 00 01 03. */
  function oncRpcCall(): Buffer {
    const call = Buffer.alloc(4 + 259);
    call.writeUInt32BE(0x8000_0000 + 259, 0);
    [0x1234_5678, 0, 2, 100_003, 3, 0].forEach((word, index) => call.writeUInt32BE(word, 4 + 4 * index));
    return call;
  }

  // Each starts with a byte of 0x80 or more, as an SSLv2-format record does; the first two also
  // have 01 03 where its type and version major are. None is a hello a server takes, and each is
  // known as not TLS before its end, so a client that sends it and waits is not held up.
  it.each([
    ['an ONC RPC call in a 259-byte fragment', oncRpcCall()],
    ['a Thrift compact call of "get", sequence id 1 (8 bytes)', Buffer.from('8221010367657400', 'hex')],
    ['a memcached binary get of "foo"', Buffer.from(`800000030000000000000003${'00'.repeat(12)}666f6f`, 'hex')],
    ['a Java serialization stream', Buffer.from('aced00057372', 'hex')],
  ])('leaves %s alone (not TLS)', (_what, bytes) => {
    expect(readClientHello(bytes)).toEqual({ kind: 'not-tls' });
    for (let length = 1; length < bytes.length; length++)
      expect(readClientHello(bytes.subarray(0, length))).not.toMatchObject({ kind: 'malformed' });
  });

  it.each([0x00, 0x01, 0x02, 0x0f])(
    'refuses a ClientHello whose record version is %i.x, not 3 (Go serves a first record of any version below 16)',
    async (major) => {
      const hello = Buffer.from(await clientHello('other.test'));
      hello[1] = major;
      const refused = { kind: 'malformed', why: `a TLS record of version ${major}.x, which no client sends` };
      expect(readClientHello(hello)).toEqual(refused);
      // Known as soon as the handshake header shows a ClientHello: record header 5, handshake header 4.
      expect(readClientHello(hello.subarray(0, 9))).toEqual(refused);
      for (const length of [1, 2, 5, 8]) expect(readClientHello(hello.subarray(0, length))).toEqual({ kind: 'incomplete' });
    },
  );

  it('reads a ClientHello of any record version as a lenient server does, when asked, waiting for it whole', async () => {
    // starttls-hello-scan.ts asks whether such bytes are a whole hello before it refuses them.
    const hello = Buffer.from(await clientHello('other.test'));
    hello[1] = 0x00;
    const lenient = { anyRecordVersion: true };
    expect(readClientHello(hello, lenient)).toEqual({ kind: 'client-hello', serverName: 'other.test' });
    expect(readClientHello(inTwoRecords(hello, 40), lenient)).toEqual({ kind: 'client-hello', serverName: 'other.test' });
    expect(readClientHello(hello.subarray(0, 9), lenient)).toEqual({ kind: 'incomplete' });
  });

  it('refuses a ClientHello after an empty record, and one of client_version 0.0 (Go reads supported_versions instead)', async () => {
    const hello = await clientHello('other.test');
    expect(readClientHello(Buffer.concat([Buffer.from([22, 3, 1, 0, 0]), hello]))).toEqual({
      kind: 'malformed',
      why: 'an empty TLS record, which no client sends',
    });
    const oldVersion = Buffer.from(hello);
    oldVersion[9] = 0;
    oldVersion[10] = 0;
    expect(readClientHello(oldVersion)).toEqual({ kind: 'client-hello', serverName: 'other.test' });
  });

  it('refuses a ClientHello whose second record has a version other than 3', async () => {
    const spread = inTwoRecords(await clientHello('other.test'), 40);
    spread[5 + 40 + 1] = 0;
    expect(readClientHello(spread)).toMatchObject({ kind: 'malformed', why: expect.stringContaining('version 0.x') });
  });

  it('leaves alone records whose first handshake message is no ClientHello a server would take (not TLS)', async () => {
    const serverHello = Buffer.from(await clientHello('registry.test'));
    serverHello[5] = 2;
    expect(readClientHello(serverHello)).toEqual({ kind: 'not-tls' });
    // A ClientHello body shorter than its fixed fields (version, random, three lengths).
    expect(readClientHello(Buffer.from([22, 3, 1, 0, 4, 1, 0, 0, 37]))).toEqual({ kind: 'not-tls' });
    expect(readClientHello(Buffer.from([22, 3, 1, 0, 4, 1, 0, 0, 38]))).toEqual({ kind: 'incomplete' });
    // A record longer than TLS allows (2^14 + 2048) that carries no ClientHello, and an alert followed by bytes that are no record.
    expect(readClientHello(Buffer.from([22, 3, 1, 0x48, 0x01]))).toEqual({ kind: 'incomplete' });
    expect(readClientHello(Buffer.from([22, 3, 1, 0x48, 0x01, 2, 0, 0, 40]))).toEqual({ kind: 'not-tls' });
    expect(readClientHello(Buffer.from([21, 3, 1, 0, 2, 1, 90, 0x47]))).toEqual({ kind: 'not-tls' });
  });

  // A server that takes records longer than TLS allows (OpenSSL 1.0.2's big buffers) would read
  // the hello in them, its server name unchecked, had they passed as not TLS.
  it('refuses a ClientHello in, or continued by, a record longer than TLS allows', async () => {
    expect(readClientHello(Buffer.from([22, 3, 1, 0x4e, 0x20, 1, 0, 0, 40]))).toMatchObject({
      kind: 'malformed',
      why: 'a TLS record of 20000 bytes',
    });
    const spread = inTwoRecords(await clientHello('other.test'), 10);
    spread.writeUInt16BE(20_000, 5 + 10 + 3);
    expect(readClientHello(spread)).toMatchObject({ kind: 'malformed', why: 'a TLS record of 20000 bytes' });
  });

  it('calls malformed a ClientHello it cannot read, or a record no client sends', async () => {
    const whole = await clientHello('registry.test');
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
    const refused = { kind: 'malformed', why: `the tunnel's TLS starts with ${why}, not a ClientHello` };
    expect(readClientHello(tls)).toEqual(refused);
    // Undecided until the bytes after it show a ClientHello's handshake header.
    expect(readClientHello(tls.subarray(0, first.length + 9))).toEqual(refused);
    for (let length = 1; length < first.length + 9; length++)
      expect(readClientHello(tls.subarray(0, length))).toEqual({ kind: 'incomplete' });
  });

  // Servers read such a list each their own way (Go refuses it, Squid takes the first host
  // name, other parsers the last), so the proxy could check one name while a server serves another.
  it.each([
    [
      'two host names',
      [
        [0, 'allowed.test'],
        [0, 'secret.test'],
      ],
      undefined,
      'more than one name',
    ],
    [
      'a host name and a name of another type',
      [
        [0, 'allowed.test'],
        [1, 'secret.test'],
      ],
      undefined,
      'more than one name',
    ],
    [
      'a name of another type before the host name',
      [
        [1, 'secret.test'],
        [0, 'allowed.test'],
      ],
      undefined,
      'without a host name',
    ],
    [
      'a second host name outside the list length',
      [
        [0, 'allowed.test'],
        [0, 'secret.test'],
      ],
      15,
      'list length',
    ],
    ['an empty host name', [[0, '']], undefined, 'an empty server name'],
  ] as const)('refuses a server_name extension listing %s', async (_what, names, listLength, why) => {
    const hello = withExtension(await clientHello(), 0, serverNameList(names, listLength));
    expect(readClientHello(hello)).toEqual({ kind: 'malformed', why: expect.stringContaining(why) });
  });

  it('reads a server_name extension listing one host name, and refuses a second server_name extension', async () => {
    expect(readClientHello(withExtension(await clientHello(), 0, serverNameList([[0, 'allowed.test']])))).toEqual({
      kind: 'client-hello',
      serverName: 'allowed.test',
    });
    const twice = withExtension(await clientHello('allowed.test'), 0, serverNameList([[0, 'secret.test']]));
    expect(readClientHello(twice)).toEqual({ kind: 'malformed', why: expect.stringContaining('two server_name extensions') });
  });

  it('refuses a ClientHello whose last extension runs past the end of its extensions', async () => {
    // The record and handshake lengths still cover the extension, so the proxy could read a
    // server name there that a server bounding its read by the extensions' length would not.
    const hello = Buffer.from(await clientHello('registry.test'));
    const at = extensionsLengthAt(hello);
    hello.writeUInt16BE(hello.readUInt16BE(at) - 1, at);
    expect(readClientHello(hello)).toEqual({ kind: 'malformed', why: expect.stringContaining('runs past the end') });
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
