// The first record a real TLS client (node:tls) sends, its ClientHello, as it went on the
// wire: what the egress proxy's server-name check reads (tls-client-hello.ts).
import { createServer, type AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/** The ClientHello record node:tls sends asking for `servername` (none when undefined). */
export async function capturedClientHello(servername?: string): Promise<Buffer> {
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
