// The proxy's decisions, pure: may this request go out, and to which address. The server
// (egress-proxy-server.ts) only gathers the facts (credential, live run, DNS answer) and
// carries the verdict out. Every refusal names the rule that refused it; the 403 body and the
// audit log say the same.
import { isIPv4, isIPv6 } from 'node:net';
import { OPENABLE_CLASSES, classifyAddress, type AddressClass } from './address-class.ts';
import { canonicalHostName, firstMatch, type HostPattern } from './host-pattern.ts';
import type { CredentialCheck } from './proxy-credential.ts';

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
  TooManyOpen: 'too-many-open',
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

/**
 * A CONNECT tunnel to port 80: refused, as plain HTTP goes as an absolute-form request, where
 * the proxy sends the checked host as `Host`. Through a tunnel the client's own `Host` would
 * reach the destination, and behind a shared address (an ingress, a CDN) pick any site there.
 * (A tunnel to 443 carries the client's TLS SNI the same way; the proxy cannot see into it.)
 */
export function refusedTunnel(port: number): Refusal | undefined {
  return port === 80
    ? refuse(
        403,
        EGRESS_RULES.PlainHttpTunnel,
        'plain HTTP through a CONNECT tunnel is refused; send it as an absolute-form request (http_proxy)',
      )
    : undefined;
}

/**
 * Tunnels and forwarded requests one run may hold open through the proxy at once. Each tunnel
 * holds a 64 KiB read buffer (tunnel-relay.ts) and a forwarded request its sockets; unbounded,
 * one run that opened a few thousand ran the proxy out of memory, and every run's tunnels
 * went with it. A package manager opens tens at a time.
 */
export const OPEN_PER_RUN = 128;

/** Whether the run may open one more, with `open` open already. */
export function refusedBeyondOpen(open: number): Refusal | undefined {
  return open >= OPEN_PER_RUN
    ? refuse(
        429,
        EGRESS_RULES.TooManyOpen,
        `the run already holds ${OPEN_PER_RUN} connections open through the proxy; close some (or reuse them) and try again`,
      )
    : undefined;
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
 * zeros compressed), an IPv4-mapped IPv6 address in its IPv4 form however it was written
 * (`::ffff:10.96.0.1`, `::ffff:a60:1`). Texts compared as written let `2001:db8:0::1` past
 * an API server listed as `2001:db8::1`.
 */
export function canonicalAddress(address: string): string {
  if (isIPv4(address) || !isIPv6(address)) return address.toLowerCase();
  let host: string;
  try {
    host = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return address.toLowerCase(); // a zone id (fe80::1%eth0), which URL does not take
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (!mapped) return host;
  const [high, low] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
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
