// /healthz (the process is alive) and /readyz (it can do its job: caches synced and its
// dependencies reachable). Readiness checks are injected, so each adapter reports its own.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/**
 * Ready, but short of something that does not stop the rest working (a watched namespace the
 * operator cannot list: controller/watched-namespaces.ts). /readyz answers 200 and names it.
 */
export interface ReadinessDegraded {
  degraded: string;
}

/** undefined = ready; a string = not ready, and why; degraded = ready, with what is missing. */
export type ReadinessCheck = () => Promise<string | ReadinessDegraded | undefined>;

export interface MetricsSource {
  contentType: string;
  metrics(): Promise<string>;
}

export function startHealthServer(
  port: number,
  checks: Record<string, ReadinessCheck>,
  metrics?: MetricsSource,
  host = '0.0.0.0',
): Promise<Server> {
  // A failing metrics source must answer 500, not become an unhandled rejection (which ends
  // the process, and with it every run of the replica).
  const server = createServer((request, response) => {
    respond(request, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { 'content-type': 'text/plain' });
      response.end(`${String(error)}\n`);
    });
  });
  async function respond(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.url === '/healthz') {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (request.url === '/readyz') {
      const failures: string[] = [];
      const degraded: string[] = [];
      for (const [name, check] of Object.entries(checks)) {
        const problem = await check().catch((error: unknown) => String(error));
        if (typeof problem === 'string' && problem) failures.push(`${name}: ${problem}`);
        else if (typeof problem === 'object') degraded.push(`${name}: degraded: ${problem.degraded}`);
      }
      const notes = [...failures, ...degraded];
      response
        .writeHead(failures.length ? 503 : 200, { 'content-type': 'text/plain' })
        .end(failures.length ? `${notes.join('\n')}\n` : ['ok', ...notes].join('\n') + '\n');
      return;
    }
    if (request.url === '/metrics' && metrics) {
      const body = await metrics.metrics();
      response.writeHead(200, { 'content-type': metrics.contentType }).end(body);
      return;
    }
    response.writeHead(404).end();
  }
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
