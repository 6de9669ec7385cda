// A real HTTP server that replays recorded exchanges of a forge's API, in order: each request
// must be the recorded one (method, path, query, JSON body), or the server records the
// mismatch and answers 599. A request without the expected credential gets the forge's own 401
// answer, as the real API would. The recordings follow the shapes of the forges' API docs.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isDeepStrictEqual } from 'node:util';

export interface RecordedExchange {
  method: string;
  /** The path as sent (percent-encoding kept), without the query. */
  path: string;
  query?: Record<string, string>;
  /** The JSON body the client must send. */
  body?: unknown;
  status: number;
  response: unknown;
}

export interface Recording {
  /** The header that carries the token, and its value for the right token. */
  credential: (token: string) => { header: string; value: RegExp };
  /** What the forge answers a request without the right token. */
  unauthorized: { status: number; response: unknown };
  exchanges: RecordedExchange[];
}

export interface RecordedForgeServer {
  /** http://127.0.0.1:PORT */
  origin: string;
  /** Requests that were not what the recording expected, said in words. */
  mismatches: string[];
  /** Recorded exchanges not yet asked for. */
  remaining(): number;
  close(): Promise<void>;
}

export async function startRecordedForgeServer(recording: Recording, token: string): Promise<RecordedForgeServer> {
  const queue = [...recording.exchanges];
  const mismatches: string[] = [];
  const credential = recording.credential(token);
  const server: Server = createServer((request, response) => {
    let raw = '';
    request.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    request.on('end', () => {
      const reply = (status: number, body: unknown) =>
        response.writeHead(status, { 'content-type': 'application/json' }).end(body === undefined ? '' : JSON.stringify(body));
      const sent = request.headers[credential.header];
      if (typeof sent !== 'string' || !credential.value.test(sent))
        return reply(recording.unauthorized.status, recording.unauthorized.response);
      const url = new URL(request.url ?? '/', 'http://x');
      const path = (request.url ?? '/').split('?')[0]!;
      const query = Object.fromEntries(url.searchParams);
      const body = raw ? (JSON.parse(raw) as unknown) : undefined;
      const expected = queue.shift();
      const problem = !expected
        ? 'no more exchanges were recorded'
        : expected.method !== request.method || expected.path !== path
          ? `expected ${expected.method} ${expected.path}`
          : !isDeepStrictEqual(expected.query ?? {}, query)
            ? `expected query ${JSON.stringify(expected.query ?? {})}, got ${JSON.stringify(query)}`
            : !isDeepStrictEqual(expected.body, body)
              ? `expected body ${JSON.stringify(expected.body)}, got ${JSON.stringify(body)}`
              : undefined;
      if (problem) {
        mismatches.push(`${request.method} ${request.url}: ${problem}`);
        return reply(599, { message: problem });
      }
      return reply(expected!.status, expected!.response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    mismatches,
    remaining: () => queue.length,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
