// /healthz (the process is alive) and /readyz (it can do its job: caches synced and its
// dependencies reachable). Readiness checks are injected, so each adapter reports its own.
import { createServer, type Server } from 'node:http';

export type ReadinessCheck = () => Promise<string | undefined>; // undefined = ready, else why not

export interface MetricsSource {
  contentType: string;
  metrics(): Promise<string>;
}

export function startHealthServer(port: number, checks: Record<string, ReadinessCheck>, metrics?: MetricsSource, host = '0.0.0.0'): Promise<Server> {
  const server = createServer(async (request, response) => {
    if (request.url === '/healthz') {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (request.url === '/readyz') {
      const failures: string[] = [];
      for (const [name, check] of Object.entries(checks)) {
        const problem = await check().catch((error: unknown) => String(error));
        if (problem) failures.push(`${name}: ${problem}`);
      }
      response.writeHead(failures.length ? 503 : 200, { 'content-type': 'text/plain' }).end(failures.length ? `${failures.join('\n')}\n` : 'ok\n');
      return;
    }
    if (request.url === '/metrics' && metrics) {
      response.writeHead(200, { 'content-type': metrics.contentType }).end(await metrics.metrics());
      return;
    }
    response.writeHead(404).end();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
