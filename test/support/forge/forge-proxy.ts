// A plain HTTP proxy in front of the test Gitea, on its own port: the operator is pointed at
// it (repository URL and API alike), so a test counts what reached the forge (pushes, pull
// requests opened) and can act at a chosen request, such as killing the operator once the
// forge has made a pull request but before the operator hears of it.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  path: string;
  status?: number;
}

export interface ForgeProxy {
  origin: string;
  seen: SeenRequest[];
  /**
   * Called with each request once the forge has answered it; returning true drops the answer
   * (the client's connection is cut), as if the client had died waiting.
   */
  onAnswered?: (request: SeenRequest) => boolean | Promise<boolean>;
  close(): Promise<void>;
}

export async function startForgeProxy(upstream: string): Promise<ForgeProxy> {
  const target = new URL(upstream);
  const proxy: ForgeProxy = { origin: '', seen: [], close: async () => undefined };
  const server: Server = createServer((incoming, outgoing) => {
    const seen: SeenRequest = { method: incoming.method ?? 'GET', path: incoming.url ?? '/' };
    proxy.seen.push(seen);
    const forward = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: incoming.method,
        path: incoming.url,
        headers: { ...incoming.headers, host: target.host },
      },
      (answer: IncomingMessage) => {
        seen.status = answer.statusCode;
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          void (async () => {
            if (await proxy.onAnswered?.(seen)) {
              outgoing.destroy();
              return;
            }
            outgoing.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(chunks));
          })();
        });
      },
    );
    forward.on('error', () => outgoing.destroy());
    incoming.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
