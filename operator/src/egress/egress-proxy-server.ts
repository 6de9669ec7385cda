// The egress proxy's I/O: an HTTP forward proxy on node:http. CONNECT opens a TCP tunnel (TLS
// stays end to end; the proxy sees only the name and port), an absolute-form request
// (GET http://host/...) is forwarded. Every request goes through the same two pure decisions
// (decide-connection.ts): before DNS (credential, live run, name on the run's and the admin's
// lists) and after it (the addresses); the proxy then connects to the address it checked,
// never resolving again. Each connection is reported to the audit once it ends. What a tunnel's
// destination sends reaches the sandbox through one reused buffer (tunnel-relay.ts).
//
// Why node:http and not a proxy library: what matters here is the checks, which no library
// makes our way, and the forwarding that is left is a few dozen lines over node:net and
// node:http, both maintained with Node itself. The libraries that would do it (proxy-chain,
// http-proxy) bring their own request parsing and upstream chaining we would have to disable.
import { createServer, request as httpRequest, Agent, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  decideAddresses,
  decideRequest,
  OPEN_PER_RUN,
  refusedBeyondOpen,
  refusedTunnel,
  type EgressPolicy,
  type EgressRun,
  type Refusal,
} from './decide-connection.ts';
import { PerRunCount } from './per-run-count.ts';
import { checkProxyAuthorization } from './proxy-credential.ts';
import { connectRelayedTo } from './tunnel-relay.ts';
import { PerRunLimit } from './per-run-limit.ts';

export interface EgressConnection {
  kind: 'connect' | 'http';
  run?: EgressRun;
  host: string;
  port: number;
  allowed: boolean;
  rule?: string;
  message?: string;
  bytesSent: number;
  bytesReceived: number;
  durationMs: number;
}

export interface EgressProxyDependencies {
  egressKey: string;
  policy: EgressPolicy;
  lookupRun(uid: string): EgressRun | undefined;
  /** Every address of a name (the proxy checks them all and connects to the first). */
  resolve(host: string): Promise<string[]>;
  record(connection: EgressConnection): void;
  /** A tunnel or upstream connection idle this long is closed. */
  idleTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** A refused CONNECT's socket is closed this long after its answer, whether or not the client hangs up. */
  refusalLingerMs?: number;
  /** How often the open tunnels and requests of runs no longer served (ended, deleted) are closed. */
  liveCheckMs?: number;
  now?: () => number;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function refusalBody(refusal: Refusal): string {
  return `chamvi egress proxy refused the connection (rule ${refusal.rule}): ${refusal.message}\n`;
}

function refusalHeaders(refusal: Refusal): Record<string, string> {
  return {
    'content-type': 'text/plain; charset=utf-8',
    'x-chamvi-egress-rule': refusal.rule,
    ...(refusal.status === 407 ? { 'proxy-authenticate': 'Basic realm="chamvi-egress"' } : {}),
  };
}

const STATUS_TEXT: Record<Refusal['status'], string> = {
  403: 'Forbidden',
  407: 'Proxy Authentication Required',
  429: 'Too Many Requests',
  502: 'Bad Gateway',
};

/** A refusal as a raw HTTP/1.1 answer, for a CONNECT (the socket is not an HTTP response). */
function rawRefusal(refusal: Refusal): string {
  const body = refusalBody(refusal);
  const headers = Object.entries({ ...refusalHeaders(refusal), 'content-length': String(Buffer.byteLength(body)), connection: 'close' })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `HTTP/1.1 ${refusal.status} ${STATUS_TEXT[refusal.status]}\r\n${headers}\r\n${body}`;
}

type Verdict = { allowed: true; run: EgressRun; host: string; address: string } | (Refusal & { run?: EgressRun; host: string });

/** The audit record of a refused connection: nothing was sent or received. */
function refusedConnection(
  kind: EgressConnection['kind'],
  verdict: Refusal & { run?: EgressRun; host: string },
  port: number,
  durationMs: number,
): EgressConnection {
  return {
    kind,
    ...(verdict.run ? { run: verdict.run } : {}),
    host: verdict.host,
    port,
    allowed: false,
    rule: verdict.rule,
    message: verdict.message,
    bytesSent: 0,
    bytesReceived: 0,
    durationMs,
  };
}

/** host:port of a CONNECT request; undefined when it is not one. */
function parseAuthority(target: string | undefined): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]*\]|[^:[\]]+):([0-9]{1,5})$/.exec(target ?? '');
  if (!match) return undefined;
  const port = Number(match[2]);
  return port >= 1 && port <= 65535 ? { host: match[1]!, port } : undefined;
}

/** Name lookups one run may have in flight at once (per-run-limit.ts); more wait their turn. */
export const LOOKUPS_PER_RUN = 2;

export function createEgressProxyServer(deps: EgressProxyDependencies): Server {
  const now = deps.now ?? (() => performance.now());
  const idleTimeoutMs = deps.idleTimeoutMs ?? 600_000;
  const connectTimeoutMs = deps.connectTimeoutMs ?? 15_000;
  const refusalLingerMs = deps.refusalLingerMs ?? 5_000;
  const liveCheckMs = deps.liveCheckMs ?? 10_000;
  // One pool of kept upstream connections per run. Shared, a connection one run had used
  // carried the next run's request to the same address, so an answer the first run made the
  // destination send (a smuggled request's) reached the second; and one run's queue of
  // requests held up every other run's to that address. A run's pool goes once it holds no
  // connection.
  const agents = new Map<string, Agent>();
  const agentOf = (uid: string) => {
    let agent = agents.get(uid);
    // Bounded in all, kept ones too: a run that cycled through many destination addresses
    // (its own DNS) kept idle sockets to each for the idle timeout, past what `open` counts.
    if (!agent)
      agents.set(
        uid,
        (agent = new Agent({ keepAlive: true, maxSockets: 64, maxTotalSockets: OPEN_PER_RUN, maxFreeSockets: 4, timeout: idleTimeoutMs })),
      );
    return agent;
  };
  const sweep = setInterval(() => {
    for (const [uid, agent] of agents) {
      const busy = [agent.sockets, agent.freeSockets, agent.requests].some((table) => Object.keys(table).length > 0);
      if (!busy) {
        agent.destroy();
        agents.delete(uid);
      }
    }
  }, 60_000);
  sweep.unref();

  /** Ends a refused CONNECT: its answer, then the socket closed even if the client never hangs up. */
  const refuseTunnel = (socket: Socket, answer: string) => {
    socket.end(answer);
    socket.setTimeout(refusalLingerMs, () => socket.destroy());
  };

  const lookups = new PerRunLimit(LOOKUPS_PER_RUN);
  const open = new PerRunCount();
  // Requests of a run whose name is being looked up (or waits for its turn): counted with the
  // open ones, so a run cannot queue thousands of sockets behind a name server that never answers.
  const deciding = new PerRunCount();
  // A run's credential ends with the run; so do its open tunnels, which it could otherwise keep
  // using (a pod in its grace period, or on a node cut off from the API server).
  const liveCheck = setInterval(() => open.closeGone((uid) => deps.lookupRun(uid) !== undefined), liveCheckMs);
  liveCheck.unref();

  async function decide(authorization: string | undefined, host: string, port: number): Promise<Verdict> {
    const credential = checkProxyAuthorization(authorization, deps.egressKey);
    const request = decideRequest(credential, deps.lookupRun, host, port, deps.policy);
    if (!request.allowed) {
      const run = credential.ok ? deps.lookupRun(credential.runUid) : undefined;
      return { ...request, host: host.toLowerCase().slice(0, 255), ...(run ? { run } : {}) };
    }
    const uid = request.run.uid;
    const crowded = refusedBeyondOpen(open.of(uid) + deciding.of(uid));
    if (crowded) return { ...crowded, run: request.run, host: request.host };
    // Nothing of it to close if the run goes meanwhile: what opens after the lookup is counted
    // in `open`, whose live check closes a gone run's.
    const decided = deciding.add(uid, () => undefined);
    let addresses: string[];
    try {
      addresses = await lookups.run(uid, () => deps.resolve(request.host));
    } catch {
      addresses = [];
    } finally {
      decided();
    }
    const address = decideAddresses(request.host, port, addresses, deps.policy);
    if (!address.allowed) return { ...address, run: request.run, host: request.host };
    return { allowed: true, run: request.run, host: request.host, address: address.address };
  }

  const server = createServer({ headersTimeout: 30_000, requestTimeout: 0, keepAliveTimeout: 60_000 });

  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    const started = now();
    const socket = client as Socket;
    socket.on('error', () => undefined);
    // A client that hangs up before its tunnel opens (while its name is looked up) is gone:
    // the server keeps half-open sockets, so without this one it stayed until the lookup ended.
    let tunnelOpen = false;
    socket.once('end', () => {
      if (!tunnelOpen) socket.destroy();
    });
    const authority = parseAuthority(req.url);
    if (!authority) {
      refuseTunnel(socket, 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    void decide(req.headers['proxy-authorization'], authority.host, authority.port).then((decided) => {
      // Allowed as a host:port, still not as a tunnel to port 80 (refusedTunnel says why), nor
      // beyond the run's open connections (counted here, where the tunnel opens at once).
      const tunnel = decided.allowed ? (refusedTunnel(authority.port) ?? refusedBeyondOpen(open.of(decided.run.uid))) : undefined;
      const verdict: Verdict = tunnel && decided.allowed ? { ...tunnel, run: decided.run, host: decided.host } : decided;
      if (!verdict.allowed) {
        refuseTunnel(socket, rawRefusal(verdict));
        deps.record(refusedConnection('connect', verdict, authority.port, now() - started));
        return;
      }
      // The client left while its name was looked up: its 'close' has been and gone, so a
      // connection opened now would stay, holding its buffer, until the destination hung up.
      if (socket.destroyed) return;
      const close = open.add(verdict.run.uid, () => socket.destroy());
      const upstream = connectRelayedTo(socket, { host: verdict.address, port: authority.port, timeout: connectTimeoutMs, noDelay: true });
      let recorded = false;
      const finish = () => {
        close();
        if (recorded) return;
        recorded = true;
        deps.record({
          kind: 'connect',
          run: verdict.run,
          host: verdict.host,
          port: authority.port,
          allowed: true,
          bytesSent: upstream.bytesWritten,
          bytesReceived: upstream.bytesRead,
          durationMs: now() - started,
        });
      };
      upstream.once('connect', () => {
        tunnelOpen = true;
        upstream.setTimeout(idleTimeoutMs);
        socket.setTimeout(idleTimeoutMs);
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        socket.pipe(upstream);
      });
      // The destination is done sending: so is the tunnel toward the sandbox (what pipe() did).
      upstream.on('end', () => socket.end());
      upstream.on('timeout', () => upstream.destroy());
      socket.on('timeout', () => socket.destroy());
      upstream.on('error', () => {
        if (!tunnelOpen) socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
        else socket.destroy();
      });
      upstream.on('close', () => {
        socket.destroy();
        finish();
      });
      socket.on('close', () => {
        upstream.destroy();
        finish();
      });
    });
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const started = now();
    let target: URL | undefined;
    try {
      target = req.url && /^http:\/\//i.test(req.url) ? new URL(req.url) : undefined;
    } catch {
      target = undefined;
    }
    if (!target) {
      res
        .writeHead(400, { 'content-type': 'text/plain; charset=utf-8' })
        .end('chamvi egress proxy: send an absolute http:// URL, or CONNECT for https\n');
      return;
    }
    const url = target;
    const port = url.port ? Number(url.port) : 80;
    // URL keeps IPv6 literals in brackets; the decision refuses them as not-a-host-name.
    void decide(req.headers['proxy-authorization'], url.hostname, port).then((decided) => {
      const crowded = decided.allowed ? refusedBeyondOpen(open.of(decided.run.uid)) : undefined;
      const verdict: Verdict = crowded && decided.allowed ? { ...crowded, run: decided.run, host: decided.host } : decided;
      if (!verdict.allowed) {
        res.writeHead(verdict.status, refusalHeaders(verdict)).end(refusalBody(verdict));
        req.resume();
        deps.record(refusedConnection('http', verdict, port, now() - started));
        return;
      }
      // As for a tunnel: a client gone while its name was looked up gets no request made.
      if (req.socket.destroyed) return;
      res.once(
        'close',
        open.add(verdict.run.uid, () => req.socket.destroy()),
      );
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      }
      // The host checked, not the client's Host header: behind one address (an ingress, a CDN)
      // the header picks the site, so a client's own would reach a name never decided on.
      headers.host = url.host;
      // A body sent chunked stays chunked. Without a length or this header, Node sends a GET's
      // body bytes as they come, and the destination reads them as a second request: one
      // never decided on, whose answer would wait on the connection for the next request.
      if (req.headers['transfer-encoding'] !== undefined && req.headers['content-length'] === undefined)
        headers['transfer-encoding'] = 'chunked';
      let bytesSent = 0;
      let bytesReceived = 0;
      let recorded = false;
      const finish = () => {
        if (recorded) return;
        recorded = true;
        deps.record({
          kind: 'http',
          run: verdict.run,
          host: verdict.host,
          port,
          allowed: true,
          bytesSent,
          bytesReceived,
          durationMs: now() - started,
        });
      };
      const upstream = httpRequest(
        {
          host: verdict.address,
          port,
          method: req.method,
          path: `${url.pathname}${url.search}`,
          headers,
          agent: agentOf(verdict.run.uid),
          timeout: connectTimeoutMs,
        },
        (response) => {
          const responseHeaders: Record<string, string | string[]> = {};
          for (const [name, value] of Object.entries(response.headers)) {
            if (value !== undefined && !HOP_BY_HOP.has(name)) responseHeaders[name] = value;
          }
          // A destination may answer any three digits (`099`); writeHead throws on one outside
          // 100-999, and thrown here it ended the proxy process, every run's tunnels with it.
          const status = response.statusCode ?? 0;
          if (status < 100 || status > 999) {
            response.destroy();
            res
              .writeHead(502, { 'content-type': 'text/plain; charset=utf-8' })
              .end(`chamvi egress proxy: the destination answered status ${status}\n`);
            finish();
            return;
          }
          res.writeHead(status, responseHeaders);
          response.on('data', (chunk: Buffer) => (bytesReceived += chunk.length));
          response.pipe(res);
          response.on('end', finish);
          response.on('error', () => res.destroy());
        },
      );
      upstream.on('timeout', () => upstream.destroy(new Error('upstream timed out')));
      upstream.on('error', () => {
        if (!res.headersSent)
          res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' }).end('chamvi egress proxy: the destination did not answer\n');
        else res.destroy();
        finish();
      });
      req.on('data', (chunk: Buffer) => (bytesSent += chunk.length));
      req.pipe(upstream);
      res.on('close', finish);
    });
  });

  server.on('close', () => {
    clearInterval(sweep);
    clearInterval(liveCheck);
    for (const agent of agents.values()) agent.destroy();
  });
  return server;
}
