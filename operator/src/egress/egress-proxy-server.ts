// The egress proxy's I/O: an HTTP forward proxy on node:http. CONNECT opens a TCP tunnel (TLS
// stays end to end; the proxy reads only the ClientHello's server name, which must be the
// tunnel's host: tls-client-hello.ts, also where TLS starts after another protocol's first
// bytes: starttls-hello-scan.ts; and, of bytes that are not TLS, whether they start with a
// PROXY protocol header or an HTTP request, neither of which a tunnel may carry:
// tunnel-first-message.ts), an absolute-form request
// (GET http://host/...) is forwarded. Every request goes through the same two pure decisions
// (decide-connection.ts): before DNS (credential, live run, name on the run's and the admin's
// lists) and after it (the addresses); the proxy then connects to the address it checked,
// never resolving again. Each connection is reported to the audit once it ends. What a tunnel's
// destination sends reaches the sandbox through one reused buffer (tunnel-relay.ts).
//
// Anyone who can run a pod labelled as a sandbox reaches this port, credential or not, so
// everything the proxy holds is bounded: client connections by source address and in all
// (refused as they arrive), open tunnels and requests by run, namespace and in all (refused
// per request, decide-connection.ts), name lookups in flight by run and namespace (queued,
// lookup-limit.ts), and a refused client's connection is closed.
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
  DEFAULT_CONNECTION_LIMITS,
  DEFAULT_OPEN_LIMITS,
  refusedBeyondConnections,
  refusedBeyondOpen,
  refusedPlainHttpTunnel,
  refusedProxyProtocolTunnel,
  refusedServerName,
  refusedTunnel,
  type ConnectionLimits,
  type EgressPolicy,
  type EgressRun,
  type OpenLimits,
  type Refusal,
} from './decide-connection.ts';
import { OpenCount, sumOpen } from './open-count.ts';
import { checkProxyAuthorization } from './proxy-credential.ts';
import { connectRelayedTo } from './tunnel-relay.ts';
import { DEFAULT_LOOKUP_LIMITS, LookupLimit, type LookupLimits } from './lookup-limit.ts';
import { SourceConnections } from './source-connections.ts';
import { StartTlsHelloScan } from './starttls-hello-scan.ts';
import { TunnelFirstMessage } from './tunnel-first-message.ts';

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
  /** How long a connect to the destination may take; once connected, idleTimeoutMs applies. */
  connectTimeoutMs?: number;
  /** A refused CONNECT's socket is closed this long after its answer, whether or not the client hangs up. */
  refusalLingerMs?: number;
  /** How often the open tunnels and requests of runs no longer served (ended, deleted) are closed. */
  liveCheckMs?: number;
  /** A client connection that has not sent a whole request head within this long is closed. */
  headersTimeoutMs?: number;
  /** Bounds on the tunnels and forwarded requests open at once (DEFAULT_OPEN_LIMITS). */
  openLimits?: OpenLimits;
  /** Bounds on the client connections held at once (DEFAULT_CONNECTION_LIMITS). */
  connectionLimits?: ConnectionLimits;
  /** Bounds on the name lookups in flight, from the thread pool they run on (DEFAULT_LOOKUP_LIMITS, libuv's default pool). */
  lookupLimits?: LookupLimits;
  /** Told of each client connection refused as it arrived (beyond connectionLimits), which no audit record names. */
  connectionRefused?(limit: 'per-source' | 'total'): void;
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

/** A refusal as a raw HTTP/1.1 answer, for a CONNECT or a connection refused as it arrives (neither has an HTTP response). */
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

/**
 * Idle kept connections one run's pool of upstream connections holds, over all its
 * destinations. A run that cycled through many destination addresses (its own DNS) otherwise
 * kept idle sockets to each for the idle timeout, past what the open count bounds.
 */
export const IDLE_UPSTREAM_PER_RUN = 8;

/**
 * A run's pool of kept upstream connections for forwarded requests. It never queues a
 * request: the open count (which holds at most OpenLimits.perRun of the run's requests, each
 * until its upstream side is done) bounds the connections in use, and keepSocketAlive the idle
 * ones. A queued request outlived its client: destroyed while it waited, it still had a new
 * connection opened for it when one of the run's closed.
 */
class RunAgent extends Agent {
  constructor(idleTimeoutMs: number) {
    super({ keepAlive: true, maxFreeSockets: 4, timeout: idleTimeoutMs });
  }

  override keepSocketAlive(socket: Duplex): boolean {
    const idle = Object.values(this.freeSockets).reduce((sum, sockets) => sum + (sockets?.length ?? 0), 0);
    return idle < IDLE_UPSTREAM_PER_RUN && (super.keepSocketAlive(socket) as unknown as boolean);
  }
}

export function createEgressProxyServer(deps: EgressProxyDependencies): Server {
  const now = deps.now ?? (() => performance.now());
  const idleTimeoutMs = deps.idleTimeoutMs ?? 600_000;
  const connectTimeoutMs = deps.connectTimeoutMs ?? 15_000;
  const refusalLingerMs = deps.refusalLingerMs ?? 5_000;
  const liveCheckMs = deps.liveCheckMs ?? 10_000;
  const headersTimeoutMs = deps.headersTimeoutMs ?? 10_000;
  const openLimits = deps.openLimits ?? DEFAULT_OPEN_LIMITS;
  const connectionLimits = deps.connectionLimits ?? DEFAULT_CONNECTION_LIMITS;
  // One pool of kept upstream connections per run. Shared, a connection one run had used
  // carried the next run's request to the same address, so an answer the first run made the
  // destination send (a smuggled request's) reached the second; and one run's queue of
  // requests held up every other run's to that address. A run's pool goes once it holds no
  // connection.
  const agents = new Map<string, Agent>();
  const agentOf = (uid: string) => {
    let agent = agents.get(uid);
    if (!agent) agents.set(uid, (agent = new RunAgent(idleTimeoutMs)));
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

  /** Closes a refused client's socket once its answer is out, and in any case after the linger, whatever the client still sends. */
  const closeAfterRefusal = (socket: Socket) => {
    const linger = setTimeout(() => socket.destroy(), refusalLingerMs);
    linger.unref();
    socket.once('close', () => clearTimeout(linger));
  };

  /** Ends a refused CONNECT: its answer, then the socket closed even if the client never hangs up. */
  const refuseTunnel = (socket: Socket, answer: string) => {
    socket.end(answer);
    closeAfterRefusal(socket);
  };

  /**
   * Answers a refused request and closes its connection. Kept alive, a refused client (one
   * with no credential) held its connection for the keep-alive timeout, renewed by each
   * refused request, and a refused request's body could trickle in for ever. The linger starts
   * once the answer is written: before it, on the same connection, an earlier request's answer
   * may still be going out.
   */
  const refuseRequest = (req: IncomingMessage, res: ServerResponse, status: number, headers: Record<string, string>, body: string) => {
    res.once('finish', () => closeAfterRefusal(req.socket));
    res.writeHead(status, { ...headers, connection: 'close' }).end(body);
    req.resume();
  };

  const connections = new SourceConnections();
  // Sockets refused as they arrived: the HTTP server still parses what they send, and a
  // request of theirs gets nothing more than the answer they already have.
  const refusedSockets = new WeakSet<Duplex>();

  const lookups = new LookupLimit(deps.lookupLimits ?? DEFAULT_LOOKUP_LIMITS);
  const open = new OpenCount();
  // Requests of a run whose name is being looked up (or waits for its turn): counted with the
  // open ones, so a run cannot queue thousands of sockets behind a name server that never answers.
  const deciding = new OpenCount();
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
    const crowded = refusedBeyondOpen(sumOpen(open.of(request.run), deciding.of(request.run)), openLimits, request.run);
    if (crowded) return { ...crowded, run: request.run, host: request.host };
    // Nothing of it to close if the run goes meanwhile: what opens after the lookup is counted
    // in `open`, whose live check closes a gone run's.
    const decided = deciding.add(request.run, () => undefined);
    let addresses: string[];
    try {
      addresses = await lookups.run(request.run, () => deps.resolve(request.host));
    } catch {
      addresses = [];
    } finally {
      decided();
    }
    const address = decideAddresses(request.host, port, addresses, deps.policy);
    if (!address.allowed) return { ...address, run: request.run, host: request.host };
    return { allowed: true, run: request.run, host: request.host, address: address.address };
  }

  // headersTimeout: a connection that never sends a whole request head, holding memory with no
  // credential shown, is closed (408) within it; Node checks every connectionsCheckingInterval,
  // 30 s unless told. requestTimeout stays off: an allowed upload may take long, and a refused
  // request's connection is closed at once.
  const server = createServer({
    headersTimeout: headersTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, headersTimeoutMs),
    requestTimeout: 0,
    keepAliveTimeout: 60_000,
  });

  // Beyond the bounds a connection is answered and closed as soon as the answer is out; these,
  // not counted, are bounded by Node itself, which closes a connection beyond twice the total
  // at once, unanswered: a flood of them cannot hold the memory the bound keeps free.
  server.maxConnections = 2 * connectionLimits.total;
  server.on('connection', (socket: Socket) => {
    const source = socket.remoteAddress ?? '';
    const held = connections.of(source);
    const refused = refusedBeyondConnections(held, connectionLimits);
    if (refused) {
      refusedSockets.add(socket);
      socket.on('error', () => undefined);
      socket.end(rawRefusal(refused), () => socket.destroy());
      closeAfterRefusal(socket);
      deps.connectionRefused?.(held.source >= connectionLimits.perSource ? 'per-source' : 'total');
      return;
    }
    socket.once('close', connections.add(source));
  });

  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    const started = now();
    const socket = client as Socket;
    socket.on('error', () => undefined);
    if (refusedSockets.has(socket)) {
      socket.destroy();
      return;
    }
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
      // beyond the open limits (counted here, where the tunnel opens at once).
      const tunnel = decided.allowed
        ? (refusedTunnel(authority.port) ?? refusedBeyondOpen(open.of(decided.run), openLimits, decided.run))
        : undefined;
      const verdict: Verdict = tunnel && decided.allowed ? { ...tunnel, run: decided.run, host: decided.host } : decided;
      if (!verdict.allowed) {
        refuseTunnel(socket, rawRefusal(verdict));
        deps.record(refusedConnection('connect', verdict, authority.port, now() - started));
        return;
      }
      // The client left while its name was looked up: its 'close' has been and gone, so a
      // connection opened now would stay, holding its buffer, until the destination hung up.
      if (socket.destroyed) return;
      const close = open.add(verdict.run, () => socket.destroy());
      const upstream = connectRelayedTo(socket, { host: verdict.address, port: authority.port, timeout: connectTimeoutMs, noDelay: true });
      let recorded = false;
      // Refused once open, for its TLS server name or for carrying plain HTTP or a PROXY header.
      let denied: Refusal | undefined;
      const finish = () => {
        close();
        if (recorded) return;
        recorded = true;
        const durationMs = now() - started;
        if (denied) {
          deps.record(refusedConnection('connect', { ...denied, run: verdict.run, host: verdict.host }, authority.port, durationMs));
          return;
        }
        deps.record({
          kind: 'connect',
          run: verdict.run,
          host: verdict.host,
          port: authority.port,
          allowed: true,
          bytesSent: upstream.bytesWritten,
          bytesReceived: upstream.bytesRead,
          durationMs,
        });
      };
      // What the client sends first waits until it shows whether it is a TLS ClientHello and
      // which server name it asks for (refusedServerName says why), or, when it is not TLS,
      // whether it starts with a PROXY protocol header (refusedProxyProtocolTunnel) and, when
      // not, until its first line shows whether it is an HTTP request (refusedPlainHttpTunnel);
      // then all of it goes on. A client sends its hello or its request line first, so this
      // costs no round trip, and a protocol whose server speaks first is not held up: the
      // destination's bytes already flow. A tunnel that starts with TLS is then relayed unread;
      // one that does not is read for a hello up to STARTTLS_WINDOW_BYTES (onScanned).
      const firstMessage = new TunnelFirstMessage();
      const onFirst = (chunk: Buffer) => {
        const reading = firstMessage.push(chunk);
        if (reading.kind === 'incomplete') return;
        const { bytes: first, hello, proxyHeader, line } = reading;
        socket.off('data', onFirst);
        socket.off('end', onEndBeforeFirst);
        denied = refusedServerName(verdict.host, hello) ?? refusedProxyProtocolTunnel(proxyHeader) ?? refusedPlainHttpTunnel(line);
        if (denied) {
          socket.destroy();
          return;
        }
        if (hello.kind === 'client-hello') {
          upstream.write(first);
          socket.pipe(upstream);
          return;
        }
        // Not TLS yet: its TLS may start after a preamble (starttls-hello-scan.ts), the first
        // message included, as a client may send its preamble and its hello in one write.
        socket.on('data', onScanned);
        socket.once('end', onEndWhileScanned);
        onScanned(first);
      };
      // Gone before its first message was whole: nothing of it goes out.
      const onEndBeforeFirst = () => socket.destroy();
      const scan = new StartTlsHelloScan((hello) => refusedServerName(verdict.host, hello));
      const onScanned = (chunk: Buffer) => {
        const step = scan.push(chunk);
        if (step.kind === 'refused') {
          denied = step.refusal;
          socket.destroy();
          return;
        }
        const flowing = step.forward.length === 0 || upstream.write(step.forward);
        if (step.kind === 'done') {
          socket.off('data', onScanned);
          socket.off('end', onEndWhileScanned);
          socket.pipe(upstream);
        } else if (!flowing) {
          // What pipe() does: the client waits while the destination's side is full.
          socket.pause();
          upstream.once('drain', () => socket.resume());
        }
      };
      // Ended inside what may be a ClientHello: nothing of it goes out, as for a first message.
      const onEndWhileScanned = () => (scan.holding ? socket.destroy() : upstream.end());
      upstream.once('connect', () => {
        tunnelOpen = true;
        upstream.setTimeout(idleTimeoutMs);
        socket.setTimeout(idleTimeoutMs);
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        socket.on('data', onFirst);
        socket.once('end', onEndBeforeFirst);
        if (head.length > 0) onFirst(head);
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
    if (refusedSockets.has(req.socket)) {
      req.socket.destroy();
      return;
    }
    let target: URL | undefined;
    try {
      target = req.url && /^http:\/\//i.test(req.url) ? new URL(req.url) : undefined;
    } catch {
      target = undefined;
    }
    if (!target) {
      refuseRequest(
        req,
        res,
        400,
        { 'content-type': 'text/plain; charset=utf-8' },
        'chamvi egress proxy: send an absolute http:// URL, or CONNECT for https\n',
      );
      return;
    }
    const url = target;
    const port = url.port ? Number(url.port) : 80;
    // URL keeps IPv6 literals in brackets; the decision refuses them as not-a-host-name.
    void decide(req.headers['proxy-authorization'], url.hostname, port).then((decided) => {
      const crowded = decided.allowed ? refusedBeyondOpen(open.of(decided.run), openLimits, decided.run) : undefined;
      const verdict: Verdict = crowded && decided.allowed ? { ...crowded, run: decided.run, host: decided.host } : decided;
      if (!verdict.allowed) {
        refuseRequest(req, res, verdict.status, refusalHeaders(verdict), refusalBody(verdict));
        deps.record(refusedConnection('http', verdict, port, now() - started));
        return;
      }
      // As for a tunnel: a client gone while its name was looked up gets no request made.
      if (req.socket.destroyed) return;
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
          // The connect's bound; from the connect on, idleTimeoutMs (below).
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
      // Counted until the upstream request is done, not until the client leaves: a client that
      // sent its request and hung up, over and over, left the requests going on uncounted, and
      // queued behind each other they grew the proxy's heap by 150 MiB and went out after
      // their run had ended.
      const release = open.add(verdict.run, () => {
        upstream.destroy();
        req.socket.destroy();
      });
      // The option's timeout is the socket's idle timeout for the whole request: a destination
      // slower than connectTimeoutMs to answer (a registry building an index, a pause mid-body)
      // got a 502. As for a tunnel, once connected the destination may be silent for
      // idleTimeoutMs. Node applies this once the socket has connected (at once for one reused
      // from the run's agent), so the connect keeps its own bound.
      upstream.once('socket', () => upstream.setTimeout(idleTimeoutMs));
      upstream.on('timeout', () => upstream.destroy(new Error('upstream timed out')));
      upstream.on('error', () => {
        if (!res.headersSent)
          res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' }).end('chamvi egress proxy: the destination did not answer\n');
        else res.destroy();
        finish();
      });
      // Done on the upstream side (answered, failed or destroyed): its place is given back.
      upstream.once('close', () => {
        release();
        finish();
      });
      req.on('data', (chunk: Buffer) => (bytesSent += chunk.length));
      req.pipe(upstream);
      // The client left before its whole answer was written: nobody waits for the rest, so the
      // upstream request ends too, wherever it is (sent, waiting for its answer, answering).
      res.once('close', () => {
        if (!res.writableFinished) upstream.destroy();
        finish();
      });
    });
  });

  server.on('close', () => {
    clearInterval(sweep);
    clearInterval(liveCheck);
    for (const agent of agents.values()) agent.destroy();
  });
  return server;
}
