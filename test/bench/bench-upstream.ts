// The upstream of `make bench-egress`: `/big` answers a body of the given size from one 1 MiB
// buffer (so serving costs next to nothing), anything else a two-byte answer. Served as plain
// HTTP (for the proxy's forwarding, which carries plain HTTP) or over TLS (for its tunnels,
// which carry TLS, as a sandbox's https does), the same answers either way.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';

function answer(downloadBytes: number): (req: IncomingMessage, res: ServerResponse) => void {
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  return (req, res) => {
    if (req.url === '/big') {
      res.writeHead(200, { 'content-length': downloadBytes });
      let left = downloadBytes / chunk.length;
      const write = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) return void res.once('drain', write);
        }
        res.end();
      };
      write();
      return;
    }
    res.writeHead(200, { 'content-length': 2 }).end('ok');
  };
}

export function createBenchUpstream(downloadBytes: number): Server {
  const server = createServer(answer(downloadBytes));
  server.keepAliveTimeout = 60_000;
  return server;
}

/** The same upstream over TLS, serving `cert` (bench-certificate.ts). */
export function createBenchTlsUpstream(downloadBytes: number, tls: { cert: string; key: string }): Server {
  const server = createTlsServer({ cert: tls.cert, key: tls.key }, answer(downloadBytes));
  server.keepAliveTimeout = 60_000;
  return server;
}
