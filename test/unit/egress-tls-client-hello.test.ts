// The TLS server name read from the first bytes of a tunnel (tls-client-hello.ts), on
// ClientHellos that node:tls really sends: whole, cut anywhere, spread over two records, and
// beside bytes of other protocols.
import { createServer, type AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { readClientHello } from '../../operator/src/egress/tls-client-hello.ts';

/** The first record a TLS client sends (its ClientHello), as it went on the wire. */
async function clientHello(servername?: string): Promise<Buffer> {
  let received = Buffer.alloc(0);
  const server = createServer();
  const hello = new Promise<Buffer>((resolve) =>
    server.on('connection', (socket) => {
      socket.on('data', (data: Buffer) => {
        received = Buffer.concat([received, data]);
        if (received.length >= 5 && received.length >= 5 + received.readUInt16BE(3)) {
          socket.destroy();
          resolve(received.subarray(0, 5 + received.readUInt16BE(3)));
        }
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = tlsConnect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, ...(servername ? { servername } : {}) });
  client.on('error', () => undefined);
  try {
    return await hello;
  } finally {
    client.destroy();
    server.close();
  }
}

/** The same handshake message carried by two records, cut at `at` bytes of it. */
function inTwoRecords(record: Buffer, at: number): Buffer {
  const message = record.subarray(5);
  const header = (length: number) => Buffer.from([22, record[1]!, record[2]!, length >> 8, length & 255]);
  return Buffer.concat([header(at), message.subarray(0, at), header(message.length - at), message.subarray(at)]);
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
    ['a byte 22 not followed by a TLS version', '\x16\x00\x01'],
  ])('leaves %s alone (not TLS)', (_what, text) => {
    expect(readClientHello(Buffer.from(text, 'latin1'))).toEqual({ kind: 'not-tls' });
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
});
