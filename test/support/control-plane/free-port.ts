// Free loopback TCP ports for the control plane's listeners, so several control planes
// (a dev cluster and a test run) can coexist on one machine.
import { createServer } from 'node:net';

function onePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port from listen(0)'));
      });
    });
  });
}

/** `count` distinct free ports. Another program could still take one before we bind it. */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await onePort());
  return [...ports];
}
