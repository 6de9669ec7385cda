// The upstream of `make bench-egress`: `/big` answers a body of the given size from one 1 MiB
// buffer (so serving costs next to nothing), anything else a two-byte answer.
import { createServer, type Server } from 'node:http';

export function createBenchUpstream(downloadBytes: number): Server {
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  const server = createServer((req, res) => {
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
  });
  server.keepAliveTimeout = 60_000;
  return server;
}
