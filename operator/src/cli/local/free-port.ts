// A free loopback TCP port: listen on port 0, read the port the kernel chose, close. Another
// program could still take it before the caller binds it; callers retry or accept that.
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port from listen(0)'))));
    });
  });
}
