// A TLS ClientHello after a tunnel's non-TLS first bytes (starttls-hello-scan.ts): found
// anywhere in the client's first 128 KiB, however its bytes arrive, and judged as a first
// message's hello (refusedServerName), while the bytes of other protocols, random ones
// included, go on unchanged and unheld.
import { describe, expect, it } from 'vitest';
import { refusedServerName, type Refusal } from '../../operator/src/egress/decide-connection.ts';
import {
  STARTTLS_WHOLE_HELLOS_MAX,
  STARTTLS_WINDOW_BYTES,
  StartTlsHelloScan,
  WATCHED_MAX_BYTES,
  type StartTlsScanStep,
} from '../../operator/src/egress/starttls-hello-scan.ts';
import { capturedClientHello as clientHello } from '../support/captured-client-hello.ts';

/** Postgres's SSLRequest: length 8, code 80877103. */
const SSL_REQUEST = Buffer.from('0000000804d2162f', 'hex');

const newScan = (windowBytes?: number) => new StartTlsHelloScan<Refusal>((hello) => refusedServerName('allowed.test', hello), windowBytes);

/** Pushes `writes` in turn, as long as the scan reads on; what went on and the last step. */
function push(scan: StartTlsHelloScan<Refusal>, writes: readonly Buffer[]) {
  const forwarded: Buffer[] = [];
  let step: StartTlsScanStep<Refusal> | undefined;
  for (const write of writes) {
    step = scan.push(write);
    if (step.kind === 'refused') break;
    forwarded.push(step.forward);
    if (step.kind === 'done') break;
  }
  return { forwarded: Buffer.concat(forwarded), step: step! };
}

/** A deterministic stream of bytes that look random (xorshift32). */
function randomBytes(length: number, seed: number): Buffer {
  const bytes = Buffer.alloc(length);
  let state = seed >>> 0 || 1;
  for (let index = 0; index < length; index++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[index] = state & 255;
  }
  return bytes;
}

/**
 * A ClientHello handshake message (no record around it) naming `serverName`, with `padding`
 * bytes of padding extensions and the extensions in `more` after them.
 */
function helloMessage(serverName: string, padding = 0, more: Buffer = Buffer.alloc(0)): Buffer {
  const name = Buffer.from(serverName);
  const sni = Buffer.alloc(9 + name.length);
  sni.writeUInt16BE(0, 0);
  sni.writeUInt16BE(5 + name.length, 2);
  sni.writeUInt16BE(3 + name.length, 4);
  sni.writeUInt16BE(name.length, 7);
  name.copy(sni, 9);
  const pads: Buffer[] = [];
  for (let left = padding; left > 0; left -= 65_000) {
    const pad = Buffer.alloc(4 + Math.min(left, 65_000));
    pad.writeUInt16BE(21, 0);
    pad.writeUInt16BE(pad.length - 4, 2);
    pads.push(pad);
  }
  const extensions = Buffer.concat([sni, ...pads, more]);
  const body = Buffer.concat([
    Buffer.from([3, 3]),
    Buffer.alloc(32, 7),
    Buffer.from([0, 0, 2, 0x13, 0x01, 1, 0, extensions.length >> 8, extensions.length & 255]),
    extensions,
  ]);
  return Buffer.concat([Buffer.from([1, body.length >> 16, (body.length >> 8) & 255, body.length & 255]), body]);
}

/** `message` in handshake records of record version `version`, `fragment` bytes of it apiece. */
function inRecords(message: Buffer, version: readonly [number, number], fragment = 16_384): Buffer {
  const records: Buffer[] = [];
  for (let at = 0; at < message.length; at += fragment) {
    const data = message.subarray(at, at + fragment);
    records.push(Buffer.from([22, version[0], version[1], data.length >> 8, data.length & 255]), data);
  }
  return Buffer.concat(records);
}

/** A MySQL COM_STMT_EXECUTE of statement `id` with one BIGINT parameter: a 22-byte payload, sequence 0. */
function mysqlExecute(id: number, value: number): Buffer {
  const packet = Buffer.alloc(26);
  packet.writeUIntLE(22, 0, 3);
  packet[4] = 0x17;
  packet.writeUInt32LE(id, 5);
  packet.writeUInt32LE(1, 10); // iteration count
  packet[15] = 1; // new parameters bound
  packet[16] = 8; // MYSQL_TYPE_LONGLONG
  packet.writeBigUInt64LE(BigInt(value), 18);
  return packet;
}

/** `bytes` in writes of 1 to `most` bytes, cut where `seed` says. */
function inWrites(bytes: Buffer, seed: number, most = 9000): Buffer[] {
  const cuts = randomBytes(bytes.length, seed + 1);
  const writes: Buffer[] = [];
  for (let at = 0, index = 0; at < bytes.length; index += 2) {
    const length = 1 + (cuts.readUInt16BE(index % (cuts.length - 1)) % most);
    writes.push(bytes.subarray(at, at + length));
    at += length;
  }
  return writes;
}

describe('StartTlsHelloScan', () => {
  it('refuses a ClientHello naming another host after a Postgres SSLRequest, in the same write, before a byte of it goes on', async () => {
    const { forwarded, step } = push(newScan(), [Buffer.concat([SSL_REQUEST, await clientHello('ep-attacker.test')])]);
    expect(step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
    expect((step as { refusal: Refusal }).refusal.message).toContain('"ep-attacker.test" is not allowed.test');
    expect(forwarded).toHaveLength(0);
  });

  it('refuses it wherever its bytes are cut, holding what may be a hello: at most its first 8 bytes go on', async () => {
    const hello = await clientHello('ep-attacker.test');
    const stream = Buffer.concat([SSL_REQUEST, hello]);
    for (let cut = 1; cut < stream.length; cut++) {
      const { forwarded, step } = push(newScan(), [stream.subarray(0, cut), stream.subarray(cut)]);
      expect(step, `cut at ${cut}`).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
      expect(forwarded.length, `cut at ${cut}`).toBeLessThanOrEqual(SSL_REQUEST.length + 8);
    }
  });

  it('refuses a hello arriving a byte at a time after the preamble', async () => {
    const stream = Buffer.concat([SSL_REQUEST, await clientHello('ep-attacker.test')]);
    const { step } = push(
      newScan(),
      [...stream].map((byte) => Buffer.from([byte])),
    );
    expect(step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
  });

  it('passes on a hello naming the tunnel’s host, byte for byte, and what follows it', async () => {
    const stream = Buffer.concat([SSL_REQUEST, await clientHello('allowed.test'), Buffer.from('after the hello')]);
    for (const writes of [[stream], inWrites(stream, 7, 40)]) {
      const scan = newScan();
      const { forwarded, step } = push(scan, writes);
      expect(step.kind).toBe('scanning');
      expect(forwarded).toEqual(stream);
      expect(scan.holding).toBe(false);
    }
  });

  it('holds a hello until it is whole, then lets it on', async () => {
    const hello = await clientHello('allowed.test');
    const scan = newScan();
    expect(scan.push(Buffer.concat([SSL_REQUEST, hello.subarray(0, 100)]))).toEqual({ kind: 'scanning', forward: SSL_REQUEST });
    expect(scan.holding).toBe(true);
    expect(scan.push(hello.subarray(100))).toEqual({ kind: 'scanning', forward: hello });
    expect(scan.holding).toBe(false);
  });

  it('refuses a hello naming another host after one naming the tunnel’s host (a decoy inside a preamble)', async () => {
    const stream = Buffer.concat([
      Buffer.from('EHLO '),
      await clientHello('allowed.test'),
      Buffer.from('\r\nSTARTTLS\r\n'),
      await clientHello('other.test'),
    ]);
    expect(push(newScan(), [stream]).step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
  });

  it('refuses a hello naming no server after a preamble, as for a first message (sni-missing)', async () => {
    const { step } = push(newScan(), [Buffer.concat([SSL_REQUEST, await clientHello()])]);
    expect(step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-missing' } });
  });

  it.each([
    ['a PROXY v1 header', Buffer.from('PROXY TCP4 10.0.0.1 10.0.0.2 40000 5432\r\n')],
    ['a PROXY v2 header', Buffer.from('0d0a0d0a000d0a515549540a2111000c0a0000010a00000208001538', 'hex')],
    ['a MySQL SSL request', Buffer.concat([Buffer.from([32, 0, 0, 1]), Buffer.alloc(32, 0x0a)])],
    ['an SMTP STARTTLS', Buffer.from('EHLO sandbox\r\nSTARTTLS\r\n')],
    ['a preamble of 100 KiB', Buffer.alloc(100 * 1024, 'a')],
  ])('refuses a hello naming another host after %s', async (_name, preamble) => {
    const { step } = push(newScan(), [preamble, await clientHello('other.test')]);
    expect(step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
  });

  it.each([
    [3, 5, 'rustls and OpenSSL read a record of any 3.x'],
    [3, 0xff, 'the same'],
  ])('refuses a hello of record version %i.%i after a preamble naming another host (%s)', async (major, minor) => {
    const hello = Buffer.from(await clientHello('other.test'));
    hello[1] = major;
    hello[2] = minor;
    expect(push(newScan(), [SSL_REQUEST, hello]).step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
  });

  it('refuses a whole hello of record version 0.1 (Go reads it), judged as the write completing it arrives, unheld before', async () => {
    const hello = Buffer.from(await clientHello('allowed.test'));
    hello[1] = 0;
    const scan = newScan();
    const first = scan.push(Buffer.concat([SSL_REQUEST, hello.subarray(0, 100)]));
    expect(first).toEqual({ kind: 'scanning', forward: Buffer.concat([SSL_REQUEST, hello.subarray(0, 100)]) });
    expect(scan.holding).toBe(false);
    const last = scan.push(hello.subarray(100));
    expect(last).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
    expect((last as { refusal: Refusal }).refusal.message).toContain('version 0.x');
  });

  it('refuses a hello padded past 16 KiB in records of version 3.1 after a preamble, holding it until its second record starts', () => {
    const message = helloMessage('other.test', 20_000);
    const stream = inRecords(message, [3, 1]);
    const scan = newScan();
    // Its first record whole: the hello must go on in another record, which has not yet begun.
    expect(scan.push(Buffer.concat([SSL_REQUEST, stream.subarray(0, 5 + 16_384)]))).toEqual({ kind: 'scanning', forward: SSL_REQUEST });
    expect(scan.holding).toBe(true);
    expect(scan.push(stream.subarray(5 + 16_384, 5 + 16_384 + 5))).toMatchObject({
      kind: 'refused',
      refusal: { rule: 'sni-mismatch', message: expect.stringContaining(`a ClientHello of ${message.length} bytes`) },
    });
  });

  it('looks at the first 128 KiB: a hello starting inside them is judged, whenever its end comes; after them, bytes go on unread', async () => {
    const hello = await clientHello('other.test');
    const before = (length: number) => Buffer.alloc(length, 'a');
    expect(push(newScan(), [before(STARTTLS_WINDOW_BYTES - 10), hello]).step).toMatchObject({ kind: 'refused' });
    const inOneWrite = Buffer.concat([before(STARTTLS_WINDOW_BYTES), hello]);
    expect(newScan().push(inOneWrite)).toEqual({ kind: 'done', forward: inOneWrite });
    expect(newScan().push(before(STARTTLS_WINDOW_BYTES))).toEqual({ kind: 'done', forward: before(STARTTLS_WINDOW_BYTES) });
  });

  it('passes on plaintext protocols unchanged, Redis and HTTP-like bytes, and ends at the window', () => {
    const plaintext = Buffer.from(
      '*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\nGET /x HTTP/1.1\r\nHost: other.test\r\n\r\n',
    );
    const scan = newScan(4 * 1024);
    const { forwarded, step } = push(scan, [plaintext]);
    expect(step).toEqual({ kind: 'scanning', forward: plaintext });
    expect(forwarded).toEqual(plaintext);
    const rest = Buffer.alloc(5000, 'x');
    expect(scan.push(rest)).toEqual({ kind: 'done', forward: rest });
  });

  it('holds nothing for a write ending in a TLS record type, nor for bytes that only start like a hello', () => {
    const scan = newScan();
    const endsIn22 = Buffer.from('PING\r\n\x16');
    expect(scan.push(endsIn22)).toEqual({ kind: 'scanning', forward: endsIn22 });
    expect(scan.holding).toBe(false);
    // A hello header declaring 16 MiB (more than any server takes); one whose record of 8 bytes is
    // followed by no record; one whose record version no server reads.
    const nearMisses = Buffer.from('160301400001ffffff' + '16030100080100005000000000' + '41' + '161003400001000050', 'hex');
    expect(scan.push(nearMisses)).toEqual({ kind: 'scanning', forward: nearMisses });
  });

  it('passes on 2.5 MiB of random bytes in random writes unchanged, refusing nothing and holding nothing at the window’s end', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const bytes = randomBytes(STARTTLS_WINDOW_BYTES, seed * 7919);
      const { forwarded, step } = push(newScan(), inWrites(bytes, seed));
      expect(step.kind, `seed ${seed}`).toBe('done');
      expect(forwarded.equals(bytes), `seed ${seed}`).toBe(true);
    }
  });

  it(`refuses a tunnel carrying more than ${STARTTLS_WHOLE_HELLOS_MAX} possible hellos read whole, passing or fitting no server`, async () => {
    // Hellos naming the tunnel's host, and hellos of record version 0.1 whose session id runs past their end (none).
    const passing = await clientHello('allowed.test');
    const overrun = Buffer.concat([Buffer.from('160001002a010000260303', 'hex'), Buffer.alloc(32, 7), Buffer.from([0xff, 0, 0, 0])]);
    const hellos = (count: number) => Buffer.concat(Array.from({ length: count }, (_, index) => (index % 2 === 0 ? passing : overrun)));
    const { step } = push(newScan(), [hellos(STARTTLS_WHOLE_HELLOS_MAX + 1)]);
    expect(step).toMatchObject({
      kind: 'refused',
      refusal: { rule: 'sni-mismatch', message: expect.stringContaining(`more than ${STARTTLS_WHOLE_HELLOS_MAX} possible ClientHellos`) },
    });
    const { forwarded, step: fewer } = push(newScan(), [hellos(STARTTLS_WHOLE_HELLOS_MAX)]);
    expect(fewer.kind).toBe('scanning');
    expect(forwarded).toEqual(hellos(STARTTLS_WHOLE_HELLOS_MAX));
  });

  it.each([
    ['statement 1', 1],
    ['statement 257, whose bytes start a hello of 64 KiB', 257],
  ])('passes on a MySQL client executing a prepared statement 100 times (%s), holding nothing', (_name, id) => {
    // `16 00 00 00 17 01 ...`: a handshake record of 23 bytes starting a ClientHello, in every packet.
    const login = Buffer.alloc(80, 0x41);
    login.writeUIntLE(76, 0, 3);
    login[3] = 1;
    const scan = newScan();
    const packets = [login, ...Array.from({ length: 100 }, (_, index) => mysqlExecute(id, 1000 + index))];
    const forwarded: Buffer[] = [];
    for (const packet of packets) {
      const step = scan.push(packet);
      expect(step.kind).toBe('scanning');
      forwarded.push((step as { forward: Buffer }).forward);
      expect(scan.holding).toBe(false);
    }
    expect(Buffer.concat(forwarded)).toEqual(Buffer.concat(packets));
  });

  it.each([
    ['257', 257],
    ['513', 513],
  ])(
    'passes on a MySQL COM_STMT_EXECUTE of 790 bytes for statement %s (`16 03 00 00 17 01 …`, a hello of over 16 KiB its next bytes show is none), and reads on',
    async (_name, id) => {
      const login = Buffer.alloc(80, 0x41);
      login.writeUIntLE(76, 0, 3);
      login[3] = 1;
      // One VAR_STRING parameter of 773 bytes: a payload of 790.
      const execute = Buffer.alloc(4 + 790, 'x');
      execute.writeUIntLE(790, 0, 3);
      execute[3] = 0;
      execute[4] = 0x17;
      execute.writeUInt32LE(id, 5);
      execute[9] = 0; // flags
      execute.writeUInt32LE(1, 10); // iteration count
      execute[14] = 0; // null bitmap
      execute[15] = 1; // new parameters bound
      execute.set([0xfd, 0], 16); // MYSQL_TYPE_VAR_STRING
      execute[18] = 0xfc;
      execute.writeUInt16LE(773, 19);
      expect(execute.subarray(0, 9).toString('hex')).toBe(`1603000017010${id >> 8}0000`);
      const packets = [login, execute, mysqlExecute(1, 7), execute, mysqlExecute(1, 8)];
      for (const writes of [packets, packets.flatMap((packet) => [packet.subarray(0, 9), packet.subarray(9)])]) {
        const scan = newScan();
        const { forwarded, step } = push(scan, writes);
        expect(step.kind).toBe('scanning');
        expect(forwarded).toEqual(Buffer.concat(packets));
        expect(scan.holding).toBe(false);
      }
      // Scanning goes on: a hello naming another host after them is refused.
      const scan = newScan();
      expect(push(scan, [...packets, await clientHello('other.test')]).step).toMatchObject({
        kind: 'refused',
        refusal: { rule: 'sni-mismatch' },
      });
    },
  );

  it.each([
    ['3.5', [3, 5]],
    ['0.1', [0, 1]],
  ] as const)(
    'refuses a hello of record version %s naming another host in 13 records of 10 bytes (servers take any number)',
    (_name, version) => {
      const { forwarded, step } = push(newScan(), [SSL_REQUEST, inRecords(helloMessage('evil.example.net', 50), version, 10)]);
      expect(step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
      expect(forwarded).toEqual(SSL_REQUEST);
    },
  );

  it.each([
    ['3.5', [3, 5]],
    ['0.1', [0, 1]],
  ] as const)(
    'refuses a hello of record version %s padded to 20 KiB (servers take 64 KiB), sending none of the write that completes it',
    (_name, version) => {
      const stream = inRecords(helloMessage('evil.example.net', 20_000), version);
      const writes = inWrites(stream, 3, 1000);
      const { forwarded, step } = push(newScan(), [SSL_REQUEST, ...writes]);
      expect(step).toMatchObject({ kind: 'refused', refusal: { rule: 'sni-mismatch' } });
      expect(forwarded).toEqual(Buffer.concat([SSL_REQUEST, stream.subarray(0, stream.length - writes.at(-1)!.length)]));
    },
  );

  it('refuses a hello of record version 3.5 naming the tunnel’s host when it carries Encrypted Client Hello, or an empty record', () => {
    const ech = Buffer.concat([Buffer.from([0xfe, 0x0d, 0, 32]), Buffer.alloc(32, 9)]);
    const withEch = inRecords(helloMessage('allowed.test', 0, ech), [3, 5]);
    expect(push(newScan(), [SSL_REQUEST, withEch]).step).toMatchObject({
      kind: 'refused',
      refusal: { rule: 'sni-mismatch', message: expect.stringContaining('Encrypted Client Hello') },
    });
    const records = inRecords(helloMessage('allowed.test'), [3, 5], 40);
    const withEmpty = Buffer.concat([records.subarray(0, 45), Buffer.from([22, 3, 5, 0, 0]), records.subarray(45)]);
    expect(push(newScan(), [SSL_REQUEST, withEmpty]).step).toMatchObject({
      kind: 'refused',
      refusal: { message: expect.stringContaining('an empty TLS record') },
    });
  });

  it(`refuses a hello of record version 0.1 whose records run past ${WATCHED_MAX_BYTES} bytes, unheld until then`, () => {
    // Records of 64 KiB carrying a hello of 128 KiB: what is kept of it stays bounded.
    const stream = inRecords(helloMessage('evil.example.net', 130_000), [0, 1], 65_535);
    const scan = newScan(4 * STARTTLS_WINDOW_BYTES);
    const forwarded: Buffer[] = [];
    let step: StartTlsScanStep<Refusal> | undefined;
    for (const write of [SSL_REQUEST, ...inWrites(stream, 5, 4096)]) {
      step = scan.push(write);
      if (step.kind !== 'scanning') break;
      expect(scan.holding).toBe(false);
      forwarded.push(step.forward);
    }
    expect(step).toMatchObject({
      kind: 'refused',
      refusal: { message: expect.stringContaining(`running past ${WATCHED_MAX_BYTES} bytes`) },
    });
    expect(Buffer.concat(forwarded).length).toBeLessThanOrEqual(SSL_REQUEST.length + WATCHED_MAX_BYTES);
  });

  it('passes on random bytes after a record header of a version no client sends, however long the records they declare', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const bytes = randomBytes(80 * 1024, seed * 104_729);
      bytes.set([22, bytes[1]! & 0x0f, bytes[2]! | 0x10, bytes[3]!, bytes[4]! | 1, 1, bytes[6]! & 1], 0);
      const { forwarded, step } = push(newScan(), inWrites(bytes, seed, 4096));
      expect(step.kind, `seed ${seed}`).toBe('scanning');
      expect(forwarded.equals(bytes), `seed ${seed}`).toBe(true);
    }
  });
});
