// The operator's two writes of every step (a run's status patch, its transcript entry) sent
// with undici's request() instead of client-node's generated clients. Those go through the
// WHATWG fetch, an observable pipeline and a model serializer that walks every field of the
// body and of the answer; with the same connection and credentials, request() spent 0.5-0.9 ms
// less CPU per write against the real API server (docs/benchmarks.md), and a step is CPU-bound
// on small machines. The controller's metadata-only list (kube/metadata-only.ts) is a GET
// here too: client-node's clients cannot ask for another Accept. Everything else keeps
// client-node's typed clients.
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';

/**
 * An answer other than 2xx. `code` and `body` are where client-node's ApiException keeps
 * them, so api-errors.ts (isNotFound, isAlreadyExists, apiRefusal) reads both alike.
 */
export class KubeApiError extends Error {
  constructor(
    readonly code: number,
    readonly body: string,
    method: string,
    path: string,
  ) {
    super(`HTTP-Code: ${code}\nMessage: ${method} ${path}: ${statusMessage(body)}\nBody: ${body.slice(0, 2048)}`);
    this.name = 'KubeApiError';
  }
}

function statusMessage(body: string): string {
  try {
    const message = (JSON.parse(body) as { message?: unknown }).message;
    if (typeof message === 'string') return message;
  } catch {
    // not a Status object
  }
  return body.slice(0, 200);
}

export type WriteMethod = 'POST' | 'PATCH';
type Method = 'GET' | WriteMethod;

export interface JsonRequests {
  /** Sends `body` as JSON (or as `contentType`, e.g. a JSON Patch) and returns the parsed answer. */
  send<T>(method: WriteMethod, path: string, body: unknown, contentType?: string): Promise<T>;
  /** The same, for a caller that does not use the answer: it is read past, not parsed. */
  sendIgnoringAnswer(method: WriteMethod, path: string, body: unknown, contentType?: string): Promise<void>;
  /** Reads `path` (with its query) and returns the parsed answer; `accept` asks for another form of it. */
  get<T>(path: string, accept?: string): Promise<T>;
}

export const JSON_PATCH = 'application/json-patch+json';

export function jsonRequests(kubeConfig: KubeConfig): JsonRequests {
  async function exchange(method: Method, path: string, body: unknown, contentType: string, accept = 'application/json') {
    const server = kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('the kubeconfig has no current cluster');
    const url = `${server}${path}`;
    const context = new RequestContext(url, HttpMethod[method]);
    // The credentials as client-node applies them (the client certificate in the dispatcher,
    // a token in a header, re-read as it re-reads it), on the kept connection (connection-reuse.ts).
    await kubeConfig.applySecurityAuthentication(context);
    const response = await request(url, {
      method,
      dispatcher: context.getDispatcher() as Dispatcher | undefined,
      headers: { ...context.getHeaders(), ...(method === 'GET' ? {} : { 'content-type': contentType }), accept },
      ...(method === 'GET' ? {} : { body: JSON.stringify(body) }),
    });
    if (response.statusCode >= 300) throw new KubeApiError(response.statusCode, await response.body.text(), method, path);
    return response.body;
  }
  return {
    async send<T>(method: WriteMethod, path: string, body: unknown, contentType = 'application/json') {
      return (await (await exchange(method, path, body, contentType)).json()) as T;
    },
    async sendIgnoringAnswer(method, path, body, contentType = 'application/json') {
      await (await exchange(method, path, body, contentType)).dump({ limit: Number.MAX_SAFE_INTEGER });
    },
    async get<T>(path: string, accept?: string) {
      return (await (await exchange('GET', path, undefined, '', accept)).json()) as T;
    },
  };
}
