// The proxy's decisions, pure: may this request go out, and to which address. The server
// (egress-proxy-server.ts) only gathers the facts (credential, live run, DNS answer) and
// carries the verdict out. Every refusal names the rule that refused it; the 403 body and the
// audit log say the same.
import { isIPv4, isIPv6 } from 'node:net';
import { OPENABLE_CLASSES, classifyAddress, embeddedIPv4, type AddressClass } from './address-class.ts';
import { canonicalHostName, firstMatch, type HostPattern } from './host-pattern.ts';
import type { CredentialCheck } from './proxy-credential.ts';
import type { HttpRequestLineReading } from './http-request-line.ts';
import type { ProxyProtocolReading } from './proxy-protocol-header.ts';
import type { ClientHelloReading } from './tls-client-hello.ts';

/** The rules a request can be refused by. Part of the API: alerts and users match on them. */
export const EGRESS_RULES = {
  CredentialMissing: 'credential-missing',
  CredentialInvalid: 'credential-invalid',
  RunNotLive: 'run-not-live',
  NotAHostName: 'not-a-host-name',
  NotOnRunList: 'not-on-run-list',
  NotInAllowEgress: 'not-in-allow-egress',
  PrivateAddress: 'private-address',
  ForbiddenAddress: 'forbidden-address',
  ApiServer: 'api-server',
  ResolutionFailed: 'resolution-failed',
  PlainHttpTunnel: 'plain-http-tunnel',
  ProxyProtocolTunnel: 'proxy-protocol-tunnel',
  TooManyOpen: 'too-many-open',
  TooManyConnections: 'too-many-connections',
  SniMismatch: 'sni-mismatch',
  SniMissing: 'sni-missing',
} as const;
export type EgressRule = (typeof EGRESS_RULES)[keyof typeof EGRESS_RULES];

/** A live run as the proxy sees it: who it is and which hosts it listed. */
export interface EgressRun {
  namespace: string;
  name: string;
  uid: string;
  allow: readonly HostPattern[];
}

export interface EgressPolicy {
  /** The admin's bound on every run (allowEgress), checked again per connection. */
  allowEgress: readonly HostPattern[];
  /** Names an admin opened to private and loopback addresses (an internal registry). */
  allowPrivateDestinations: readonly HostPattern[];
  /** Addresses and ports of the Kubernetes API server: closed for everyone. */
  apiServer: readonly { address: string; port: number }[];
}

export interface Refusal {
  allowed: false;
  /** 407 asks for (other) credentials; 403 refuses; 429 while the run holds too many open; 502 when the name does not resolve. */
  status: 403 | 407 | 429 | 502;
  rule: EgressRule;
  message: string;
}

export type RequestDecision = { allowed: true; run: EgressRun; host: string; port: number; pattern: HostPattern } | Refusal;

const refuse = (status: Refusal['status'], rule: EgressRule, message: string): Refusal => ({ allowed: false, status, rule, message });

/** A host as given in a request, shown in a message without control characters. */
const shown = (host: string) => JSON.stringify(host.slice(0, 255)).replace(/[^\x20-\x7e]/g, '?');

const plainHttpTunnel = () =>
  refuse(
    403,
    EGRESS_RULES.PlainHttpTunnel,
    'plain HTTP through a CONNECT tunnel is refused; send it as an absolute-form request (http_proxy)',
  );

/**
 * A CONNECT tunnel to port 80: refused, as plain HTTP goes as an absolute-form request, where
 * the proxy sends the checked host as `Host`. Through a tunnel the client's own `Host` would
 * reach the destination, and behind a shared address (an ingress, a CDN) pick any site there.
 * (A tunnel carrying TLS names its site in the ClientHello's server name, which the proxy
 * reads: refusedServerName.)
 */
export function refusedTunnel(port: number): Refusal | undefined {
  return port === 80 ? plainHttpTunnel() : undefined;
}

/**
 * A tunnel, to any port, whose first bytes are an HTTP request line: refused for the reason
 * refusedTunnel gives, once its bytes show it (an ingress listening for plain HTTP on a
 * listed `:8080` picks its site by the client's `Host` as one on port 80 does). Other
 * protocols that are not TLS (SSH, SMTP) go through.
 */
export function refusedPlainHttpTunnel(line: HttpRequestLineReading): Refusal | undefined {
  return line === 'http-request' ? plainHttpTunnel() : undefined;
}

/**
 * A tunnel whose first bytes are a PROXY protocol header (v1 or v2): refused, as the proxy is
 * the destination's client of record. A server that takes the header believes the source
 * address the sandbox wrote in it (one it trusts, such as 127.0.0.1), and reads the bytes after
 * it as a first message, which refusedPlainHttpTunnel, reading the first line only, does not see.
 */
export function refusedProxyProtocolTunnel(header: ProxyProtocolReading): Refusal | undefined {
  if (header !== 'proxy-protocol') return undefined;
  return refuse(
    403,
    EGRESS_RULES.ProxyProtocolTunnel,
    'a PROXY protocol header through a CONNECT tunnel is refused: the proxy is the client of record, and the destination would believe the source address it claims',
  );
}

/**
 * A tunnel's TLS server name (SNI) must be the host it was opened to, as the proxy checked it:
 * behind a shared address (a CDN, an ingress) the server name picks the site, so a tunnel to a
 * listed host could otherwise reach any site sharing its address. The name is compared as the
 * proxy compares host names, without case and without one final dot, since honest clients send
 * the host as it was written: Go, Java, Node and Python send `https://GitHub.com/` as
 * `GitHub.com`, and Python `github.com.` with its dot (Maven, Gradle and Go take such hosts from
 * a repository's config). A server that compares names exactly (HAProxy's `req.ssl_sni` without
 * `-i`) serves its default site for such a name, another site on the listed host's address:
 * the exposure of domain fronting (SECURITY.md, Known limits), which the proxy cannot close.
 *
 * A ClientHello without a server name is refused (sni-missing) when the host has a dot. A
 * server that picks the site by the Host header sent inside TLS, after the handshake
 * (ingress-nginx, Go's net/http, Envoy), serves whichever site that header names, and the
 * proxy cannot read it; one that picks by SNI serves its default site, which the run did not
 * list. Clients send the name for such a host unless SNI was turned off, and a tunnel is only
 * ever opened to a host name (decideRequest refuses IP literals). A single-label host
 * (`registry`, which a pattern and the proxy's hostAliases may name) is the exception: RFC 6066
 * asks for a fully qualified name, and clients such as Java send none for it, so its hello
 * passes without one; the site is then the Host header's choice, the exposure of domain
 * fronting again.
 *
 * A tunnel whose first bytes are not TLS (plain HTTP is refused by refusedPlainHttpTunnel,
 * other protocols pass) meets this check where its TLS starts after them (Postgres's
 * SSLRequest, STARTTLS; a PROXY header is refused by refusedProxyProtocolTunnel): a ClientHello in its first 128 KiB is judged here as a
 * first one is (starttls-hello-scan.ts). TLS the proxy cannot check (another record or
 * a version other than 3 before the ClientHello, an SSLv2-format ClientHello, Encrypted Client
 * Hello, a server_name extension that servers read differently) reads as malformed and is
 * refused.
 */
export function refusedServerName(host: string, hello: ClientHelloReading): Refusal | undefined {
  if (hello.kind === 'malformed') {
    return refuse(403, EGRESS_RULES.SniMismatch, `the TLS ClientHello sent through the tunnel to ${host} could not be read: ${hello.why}`);
  }
  if (hello.kind !== 'client-hello') return undefined;
  if (hello.serverName === undefined) {
    if (!host.includes('.')) return undefined;
    return refuse(
      403,
      EGRESS_RULES.SniMissing,
      `the TLS ClientHello sent through the tunnel to ${host} names no server (SNI); without it the destination picks the site ` +
        `by what the proxy cannot see, so a tunnel carries TLS only when it names ${host}: connect by that name, with SNI on`,
    );
  }
  if (canonicalHostName(hello.serverName) === host) return undefined;
  return refuse(
    403,
    EGRESS_RULES.SniMismatch,
    `the TLS server name ${shown(hello.serverName)} is not ${host}, the host the tunnel was opened to; a tunnel carries TLS to its own host only`,
  );
}

/**
 * Tunnels and forwarded requests one run may hold open through the proxy at once. Each holds
 * memory in the proxy (a tunnel's buffers, a forwarded request's sockets); unbounded, one run
 * that opened a few thousand ran the proxy out of memory, and every run's tunnels went with
 * it. A package manager opens tens at a time.
 */
export const OPEN_PER_RUN = 128;

/**
 * What the proxy holds open at once: per run, per namespace (a tenant's runs together) and in
 * all. The per-run bound alone let 16 runs of one tenant hold 2 048 stalled tunnels, 430 MiB
 * over a process the chart gives 256 MiB.
 */
export interface OpenLimits {
  perRun: number;
  perNamespace: number;
  total: number;
}

/**
 * The defaults fit the chart's 256 MiB limit. A tunnel both of whose ends stall (the sandbox
 * reads nothing, the destination reads nothing, both keep sending) holds its socket buffers
 * both ways and its relay buffer: 512 such tunnels took the process from 72 to 207 MiB RSS
 * (Node 24, measured with the review's scripts), and as many idle connections more added
 * nothing visible. Beyond that the heap's growth under load has the rest. Half the total per
 * namespace, so one tenant's runs leave the other half to the others. Raise them with the
 * memory limit (docs/egress.md).
 */
export const DEFAULT_OPEN_LIMITS: OpenLimits = { perRun: OPEN_PER_RUN, perNamespace: 256, total: 512 };

/** What is open now: the run's, its namespace's and the proxy's, without the one asked for. */
export interface OpenCounts {
  run: number;
  namespace: number;
  total: number;
}

/** Whether the run may open one more, with `open` open already. The narrowest bound reached is named. */
export function refusedBeyondOpen(open: OpenCounts, limits: OpenLimits, run: Pick<EgressRun, 'namespace'>): Refusal | undefined {
  if (open.run >= limits.perRun) {
    return refuse(
      429,
      EGRESS_RULES.TooManyOpen,
      `the run already holds ${limits.perRun} connections open through the proxy; close some (or reuse them) and try again`,
    );
  }
  if (open.namespace >= limits.perNamespace) {
    return refuse(
      429,
      EGRESS_RULES.TooManyOpen,
      `the runs of namespace ${run.namespace} already hold ${limits.perNamespace} connections open through the proxy, ` +
        'its bound for one namespace; try again once some close, or ask the admin to raise egressProxy.limits.openPerNamespace',
    );
  }
  if (open.total >= limits.total) {
    return refuse(
      429,
      EGRESS_RULES.TooManyOpen,
      `the proxy already holds ${limits.total} connections open for all runs, the bound on its memory; ` +
        'try again once some close, or ask the admin to raise egressProxy.limits.open (and its memory)',
    );
  }
  return undefined;
}

/**
 * Client connections the proxy holds at once, from one source address (a sandbox pod) and in
 * all, whether or not they carry a credential: before a request is read nothing says whose a
 * connection is, and 8 000 idle ones, never asking for anything, held 214 MiB.
 */
export interface ConnectionLimits {
  perSource: number;
  total: number;
}

/**
 * A run's open tunnels and requests (at most 128) each take a connection, and its tools keep
 * a few idle ones: 256 from one pod leaves room for both. The total is twice the open bound,
 * for the idle and refused connections beside the open ones; a connection that holds nothing
 * costs 13 to 30 KiB (27 KiB for one answered 407 and kept), so 1 024 of them take 30 MiB.
 */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { perSource: 256, total: 1024 };

/** Whether one more connection from a source may be served, with `open` open already. */
export function refusedBeyondConnections(open: { source: number; total: number }, limits: ConnectionLimits): Refusal | undefined {
  if (open.source >= limits.perSource) {
    return refuse(
      429,
      EGRESS_RULES.TooManyConnections,
      `this address already holds ${limits.perSource} connections to the proxy; close some (or reuse them) and try again`,
    );
  }
  if (open.total >= limits.total) {
    return refuse(
      429,
      EGRESS_RULES.TooManyConnections,
      `the proxy already holds ${limits.total} connections, the bound on its memory; try again once some close`,
    );
  }
  return undefined;
}

/** Stage 1, before any DNS: who asks, and is the name on their list and within the admin's? */
export function decideRequest(
  credential: CredentialCheck,
  lookupRun: (uid: string) => EgressRun | undefined,
  rawHost: string,
  port: number,
  policy: EgressPolicy,
): RequestDecision {
  if (!credential.ok) {
    return credential.why === 'missing'
      ? refuse(407, EGRESS_RULES.CredentialMissing, 'the request carries no Proxy-Authorization; use the proxy URL in HTTPS_PROXY')
      : refuse(407, EGRESS_RULES.CredentialInvalid, 'the proxy credential is not valid');
  }
  const run = lookupRun(credential.runUid);
  if (!run) return refuse(403, EGRESS_RULES.RunNotLive, 'the run this credential was issued to has ended or does not exist');
  const host = canonicalHostName(rawHost);
  if (host === undefined) {
    return refuse(403, EGRESS_RULES.NotAHostName, `${shown(rawHost)} is not a host name; egress is by name only, never by IP address`);
  }
  const pattern = firstMatch(run.allow, host, port);
  if (!pattern) {
    return refuse(
      403,
      EGRESS_RULES.NotOnRunList,
      `${host}:${port} is not in spec.sandbox.egress.allow of run ${run.namespace}/${run.name}; add it there (in a new run) to reach it`,
    );
  }
  if (!firstMatch(policy.allowEgress, host, port)) {
    return refuse(403, EGRESS_RULES.NotInAllowEgress, `${host}:${port} is not in the operator's allowEgress`);
  }
  return { allowed: true, run, host, port, pattern };
}

export type AddressDecision = { allowed: true; address: string; addressClass: AddressClass } | Refusal;

/**
 * One text per address: IPv6 in its canonical form (the WHATWG URL serializer's: lower case,
 * zeros compressed), and an IPv6 address that carries an IPv4 address (embeddedIPv4: mapped,
 * compatible, translated, NAT64) as that IPv4 address however it was written (`::ffff:10.96.0.1`,
 * `::ffff:a60:1`, `64:ff9b::a60:1`), the forms the address classes judge by it. Texts compared as
 * written let `2001:db8:0::1` past an API server listed as `2001:db8::1`, and `64:ff9b::2276:a`
 * past one listed as `34.118.0.10`.
 */
export function canonicalAddress(address: string): string {
  if (isIPv4(address) || !isIPv6(address)) return address.toLowerCase();
  const carried = embeddedIPv4(address);
  if (carried !== undefined) return carried;
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return address.toLowerCase(); // a zone id (fe80::1%eth0), which URL does not take
  }
}

function sameAddress(a: string, b: string): boolean {
  return canonicalAddress(a) === canonicalAddress(b);
}

/**
 * Stage 2, after DNS: every address the name resolved to must be allowed (a name that answers
 * with one public and one private address is refused, or a retry could land on the private
 * one), and the proxy connects to the first of exactly these addresses, never resolving again.
 */
export function decideAddresses(host: string, port: number, addresses: readonly string[], policy: EgressPolicy): AddressDecision {
  if (addresses.length === 0) return refuse(502, EGRESS_RULES.ResolutionFailed, `${host} did not resolve to any address`);
  const opened = firstMatch(policy.allowPrivateDestinations, host, port) !== undefined;
  for (const address of addresses) {
    if (policy.apiServer.some((endpoint) => endpoint.port === port && sameAddress(endpoint.address, address))) {
      return refuse(
        403,
        EGRESS_RULES.ApiServer,
        `${host}:${port} resolves to the Kubernetes API server (${address}), which sandboxes never reach`,
      );
    }
    const addressClass = classifyAddress(address);
    if (addressClass === 'public') continue;
    if (OPENABLE_CLASSES.has(addressClass)) {
      if (opened) continue;
      return refuse(
        403,
        EGRESS_RULES.PrivateAddress,
        `${host} resolves to the ${addressClass} address ${address}; only names an admin lists in allowPrivateDestinations may reach such addresses`,
      );
    }
    return refuse(
      403,
      EGRESS_RULES.ForbiddenAddress,
      `${host} resolves to the ${addressClass} address ${address}, which sandboxes never reach`,
    );
  }
  return { allowed: true, address: addresses[0]!, addressClass: classifyAddress(addresses[0]!) };
}
