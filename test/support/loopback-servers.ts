// Servers and sockets a unit test opens on loopback, each closed after the test (a socket
// destroyed, a server closed), so a test that fails half-way leaves nothing listening.
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterEach } from 'vitest';

export interface LoopbackServers {
  /** Listens on 127.0.0.1 on a free port; closed after the test. */
  listen(server: Server): Promise<number>;
  /** A socket to destroy after the test. */
  track(socket: Socket): Socket;
}

/** Call at a test file's top level: registers the afterEach that closes what the tests opened. */
export function loopbackServers(): LoopbackServers {
  const servers: Server[] = [];
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  });
  return {
    async listen(server) {
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return (server.address() as AddressInfo).port;
    },
    track(socket) {
      sockets.push(socket);
      return socket;
    },
  };
}
