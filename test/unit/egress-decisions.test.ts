// Issue #12: the egress proxy's decisions, pure. Before DNS: the credential, the live run, the
// name on the run's list and within the admin's. After DNS: every address the name resolved
// to, with private, loopback, link-local, metadata and API-server addresses closed even for *.
import { describe, expect, it } from 'vitest';
import { classifyAddress } from '../../operator/src/egress/address-class.ts';
import {
  EGRESS_RULES,
  canonicalAddress,
  decideAddresses,
  decideRequest,
  refusedBeyondConnections,
  refusedBeyondOpen,
  refusedPlainHttpTunnel,
  refusedServerName,
  type EgressRun,
} from '../../operator/src/egress/decide-connection.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';
import { checkProxyAuthorization, proxyToken } from '../../operator/src/egress/proxy-credential.ts';
import { readClientHello } from '../../operator/src/egress/tls-client-hello.ts';

const KEY = 'k'.repeat(48);
const UID_A = '11111111-1111-4111-8111-111111111111';
const UID_B = '22222222-2222-4222-8222-222222222222';
const runA: EgressRun = {
  namespace: 'agents',
  name: 'a',
  uid: UID_A,
  allow: parseHostPatterns(['registry.npmjs.org', '*.internal.example', '*']),
};
const runB: EgressRun = { namespace: 'agents', name: 'b', uid: UID_B, allow: parseHostPatterns(['pypi.org']) };
const live = new Map([
  [UID_A, runA],
  [UID_B, runB],
]);
const policy = {
  allowEgress: parseHostPatterns(['*']),
  allowPrivateDestinations: parseHostPatterns(['*.internal.example']),
  apiServer: [{ address: '10.96.0.1', port: 443 }],
};
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const credentialOf = (uid: string) => basic(uid, proxyToken(KEY, uid));

describe('checkProxyAuthorization', () => {
  it.each([
    ['no header', undefined, { ok: false, why: 'missing' }],
    ['another scheme', `Bearer ${proxyToken(KEY, UID_A)}`, { ok: false, why: 'malformed' }],
    ['a user that is not a run uid', basic('admin', 'x'), { ok: false, why: 'malformed' }],
    ["run A's uid with run B's token", basic(UID_A, proxyToken(KEY, UID_B)), { ok: false, why: 'bad-token' }],
    ['a token made with another key', basic(UID_A, proxyToken('x'.repeat(48), UID_A)), { ok: false, why: 'bad-token' }],
    ['a truncated token', basic(UID_A, proxyToken(KEY, UID_A).slice(0, 20)), { ok: false, why: 'bad-token' }],
    ["run A's own credential", credentialOf(UID_A), { ok: true, runUid: UID_A }],
  ] as const)('%s', (_why, header, expected) => {
    expect(checkProxyAuthorization(header, KEY)).toEqual(expected);
  });
});

describe('decideRequest', () => {
  const decide = (header: string | undefined, host: string, port: number, allowEgress = policy.allowEgress) =>
    decideRequest(checkProxyAuthorization(header, KEY), (uid) => live.get(uid), host, port, { ...policy, allowEgress });

  it.each([
    ['no credential', undefined, 'registry.npmjs.org', 443, 407, EGRESS_RULES.CredentialMissing],
    ['a forged credential', basic(UID_A, 'forged'), 'registry.npmjs.org', 443, 407, EGRESS_RULES.CredentialInvalid],
    [
      'a valid credential of a run that ended',
      credentialOf('33333333-3333-4333-8333-333333333333'),
      'pypi.org',
      443,
      403,
      EGRESS_RULES.RunNotLive,
    ],
    ['an IPv4 literal, even with *', credentialOf(UID_A), '127.0.0.1', 443, 403, EGRESS_RULES.NotAHostName],
    ['the metadata address as a literal', credentialOf(UID_A), '169.254.169.254', 80, 403, EGRESS_RULES.NotAHostName],
    ['a decimal IPv4 literal', credentialOf(UID_A), '2130706433', 80, 403, EGRESS_RULES.NotAHostName],
    ['an IPv6 literal', credentialOf(UID_A), '[::1]', 443, 403, EGRESS_RULES.NotAHostName],
    ["a host on the other run's list only", credentialOf(UID_A), 'pypi.org', 8443, 403, EGRESS_RULES.NotOnRunList],
    ["run B asking for run A's host", credentialOf(UID_B), 'registry.npmjs.org', 443, 403, EGRESS_RULES.NotOnRunList],
  ] as const)('refuses %s', (_why, header, host, port, status, rule) => {
    expect(decide(header, host, port)).toMatchObject({ allowed: false, status, rule });
  });

  it('names the host and the run in a refusal of a host off the run list', () => {
    const decision = decide(credentialOf(UID_B), 'registry.npmjs.org', 443);
    expect(decision).toMatchObject({
      message: expect.stringContaining('registry.npmjs.org:443 is not in spec.sandbox.egress.allow of run agents/b'),
    });
  });

  it('refuses what a run lists but the admin no longer allows (allowEgress checked per connection)', () => {
    expect(decide(credentialOf(UID_A), 'registry.npmjs.org', 443, parseHostPatterns(['pypi.org']))).toMatchObject({
      allowed: false,
      rule: EGRESS_RULES.NotInAllowEgress,
    });
  });

  it.each([
    ['registry.npmjs.org', 443, 'registry.npmjs.org'],
    ['REGISTRY.npmjs.org.', 443, 'registry.npmjs.org'],
  ])('allows %s:%d as %s for its run', (host, port, canonical) => {
    expect(decide(credentialOf(UID_A), host, port)).toMatchObject({ allowed: true, host: canonical, run: { uid: UID_A } });
  });
});

describe('decideAddresses', () => {
  it.each([
    ['a public address', 'example.com', 443, ['93.184.215.14'], true, undefined],
    ['loopback, not named by the admin', 'sneaky.example', 443, ['127.0.0.1'], false, EGRESS_RULES.PrivateAddress],
    ['IPv6 loopback', 'sneaky.example', 443, ['::1'], false, EGRESS_RULES.PrivateAddress],
    ['a 10/8 address', 'sneaky.example', 443, ['10.1.2.3'], false, EGRESS_RULES.PrivateAddress],
    ['a 172.16/12 address', 'sneaky.example', 443, ['172.31.255.1'], false, EGRESS_RULES.PrivateAddress],
    ['a 192.168/16 address', 'sneaky.example', 443, ['192.168.1.1'], false, EGRESS_RULES.PrivateAddress],
    ['an IPv4-mapped private address', 'sneaky.example', 443, ['::ffff:10.0.0.1'], false, EGRESS_RULES.PrivateAddress],
    ['a unique-local IPv6 address', 'sneaky.example', 443, ['fd12::1'], false, EGRESS_RULES.PrivateAddress],
    ['one public and one private address', 'sneaky.example', 443, ['93.184.215.14', '10.0.0.1'], false, EGRESS_RULES.PrivateAddress],
    ['the metadata address', 'sneaky.example', 80, ['169.254.169.254'], false, EGRESS_RULES.ForbiddenAddress],
    [
      'the metadata address, for a name the admin opened',
      'meta.internal.example',
      80,
      ['169.254.169.254'],
      false,
      EGRESS_RULES.ForbiddenAddress,
    ],
    ['the IPv6 metadata address', 'sneaky.example', 80, ['fd00:ec2::254'], false, EGRESS_RULES.ForbiddenAddress],
    ['a link-local address', 'sneaky.example', 80, ['169.254.10.1'], false, EGRESS_RULES.ForbiddenAddress],
    ['an IPv6 link-local address', 'sneaky.example', 80, ['fe80::1'], false, EGRESS_RULES.ForbiddenAddress],
    ['the unspecified address', 'sneaky.example', 80, ['0.0.0.0'], false, EGRESS_RULES.ForbiddenAddress],
    ['the API server', 'sneaky.example', 443, ['10.96.0.1'], false, EGRESS_RULES.ApiServer],
    ['the API server, for a name the admin opened', 'k.internal.example', 443, ['10.96.0.1'], false, EGRESS_RULES.ApiServer],
    ['the API server, IPv4-mapped', 'k.internal.example', 443, ['::ffff:10.96.0.1'], false, EGRESS_RULES.ApiServer],
    ['the API server, IPv4-mapped in hex', 'k.internal.example', 443, ['::ffff:a60:1'], false, EGRESS_RULES.ApiServer],
    ['the API server, IPv4-mapped in full', 'k.internal.example', 443, ['0:0:0:0:0:FFFF:0A60:0001'], false, EGRESS_RULES.ApiServer],
    ['no address at all', 'nothing.example', 443, [], false, EGRESS_RULES.ResolutionFailed],
    ['a private address of a name the admin opened', 'registry.internal.example', 443, ['10.1.2.3'], true, undefined],
    ['loopback of a name the admin opened', 'registry.internal.example', 443, ['127.0.0.1'], true, undefined],
    ["the API server's address on another port, for a name the admin opened", 'x.internal.example', 80, ['10.96.0.1'], true, undefined],
  ] as const)('%s', (_why, host, port, addresses, allowed, rule) => {
    const decision = decideAddresses(host, port, addresses, policy);
    expect(decision.allowed).toBe(allowed);
    if (!decision.allowed) expect(decision.rule).toBe(rule);
    else expect(decision.address).toBe(addresses[0]);
  });
});

describe('decideAddresses, with the API server at an IPv6 address', () => {
  const v6 = { ...policy, apiServer: [{ address: 'fd00:10:96::1', port: 443 }] };
  it.each([['fd00:10:96::1'], ['fd00:10:96:0::1'], ['FD00:0010:0096:0000:0000:0000:0000:0001']])(
    'refuses %s, however it is written',
    (address) => {
      const decision = decideAddresses('k.internal.example', 443, [address], v6);
      expect(decision).toMatchObject({ allowed: false, rule: EGRESS_RULES.ApiServer });
    },
  );
  it('lets another address of a name the admin opened through', () => {
    expect(decideAddresses('k.internal.example', 443, ['fd00:10:96::2'], v6).allowed).toBe(true);
  });
});

describe('decideAddresses, with the API server at a public IPv4 address (a public endpoint)', () => {
  const publicEndpoint = { ...policy, apiServer: [{ address: '34.118.0.10', port: 443 }] };
  // Every IPv6 form classifyAddress judges by the IPv4 address it carries is that address here too.
  it.each([
    ['NAT64', '64:ff9b::2276:a'],
    ['NAT64, dotted', '64:ff9b::34.118.0.10'],
    ['IPv4-translated', '::ffff:0:2276:a'],
    ['IPv4-translated, dotted', '::ffff:0:34.118.0.10'],
    ['IPv4-compatible', '::34.118.0.10'],
    ['IPv4-compatible in hex', '::2276:a'],
    ['IPv4-mapped', '::ffff:2276:a'],
  ])('refuses it written %s (%s)', (_form, address) => {
    expect(decideAddresses('evil.example.net', 443, [address], publicEndpoint)).toMatchObject({
      allowed: false,
      rule: EGRESS_RULES.ApiServer,
    });
  });
  it('lets a neighbouring public address through, written as NAT64', () => {
    expect(decideAddresses('evil.example.net', 443, ['64:ff9b::2276:b'], publicEndpoint).allowed).toBe(true);
  });
});

describe('canonicalAddress', () => {
  it.each([
    ['64:ff9b::a60:1', '10.96.0.1'],
    ['::ffff:0:a60:1', '10.96.0.1'],
    ['::a60:1', '10.96.0.1'],
    ['0:0:0:0:0:FFFF:0A60:0001', '10.96.0.1'],
    ['::1', '::1'],
    ['::', '::'],
    ['64:ff9b:1::a60:1', '64:ff9b:1::a60:1'],
    ['2001:DB8:0::1', '2001:db8::1'],
  ])('writes %s as %s', (address, canonical) => {
    expect(canonicalAddress(address)).toBe(canonical);
  });
  it('gives every IPv6 address classifyAddress judges by an IPv4 address as that IPv4 address', () => {
    for (const address of ['64:ff9b::a9fe:a9fe', '::ffff:0:a9fe:a9fe', '::a9fe:a9fe', '::ffff:a9fe:a9fe']) {
      expect(classifyAddress(address)).toBe(classifyAddress(canonicalAddress(address)));
      expect(canonicalAddress(address)).toBe('169.254.169.254');
    }
  });
});

describe('refusedBeyondOpen', () => {
  const limits = { perRun: 4, perNamespace: 6, total: 10 };
  it.each([
    ['below every bound', { run: 3, namespace: 5, total: 9 }, undefined],
    ["at the run's bound", { run: 4, namespace: 4, total: 4 }, 'the run already holds 4'],
    ["at the namespace's bound, the run below its own", { run: 2, namespace: 6, total: 6 }, 'namespace agents already hold 6'],
    ["at the proxy's bound, the run and namespace below theirs", { run: 0, namespace: 0, total: 10 }, 'the proxy already holds 10'],
    ['at every bound: the run’s is named, the one its author can act on', { run: 4, namespace: 6, total: 10 }, 'the run already holds 4'],
  ])('%s', (_why, open, message) => {
    const refusal = refusedBeyondOpen(open, limits, runA);
    if (message === undefined) expect(refusal).toBeUndefined();
    else expect(refusal).toMatchObject({ status: 429, rule: EGRESS_RULES.TooManyOpen, message: expect.stringContaining(message) });
  });
});

describe('refusedBeyondConnections', () => {
  const limits = { perSource: 3, total: 5 };
  it.each([
    ['below both bounds', { source: 2, total: 4 }, undefined],
    ["at the source's bound", { source: 3, total: 3 }, 'this address already holds 3'],
    ["at the proxy's bound", { source: 0, total: 5 }, 'the proxy already holds 5'],
  ])('%s', (_why, open, message) => {
    const refusal = refusedBeyondConnections(open, limits);
    if (message === undefined) expect(refusal).toBeUndefined();
    else expect(refusal).toMatchObject({ status: 429, rule: EGRESS_RULES.TooManyConnections, message: expect.stringContaining(message) });
  });
});

describe('refusedServerName', () => {
  it.each([
    ['the host the tunnel was opened to', { kind: 'client-hello', serverName: 'registry.npmjs.org' }, undefined, undefined],
    ['bytes that are not TLS', { kind: 'not-tls' }, undefined, undefined],
    [
      // A server picking its site by the Host header inside TLS would serve any site on the address.
      'no server name',
      { kind: 'client-hello' },
      EGRESS_RULES.SniMissing,
      'the TLS ClientHello sent through the tunnel to registry.npmjs.org names no server (SNI)',
    ],
    // Honest clients send the host as it was written (Go, Java, Node, Python: `GitHub.com`; Python: `github.com.`).
    ['the same host in upper case, with a final dot', { kind: 'client-hello', serverName: 'Registry.NPMJS.org.' }, undefined, undefined],
    ['the same host with a final dot', { kind: 'client-hello', serverName: 'registry.npmjs.org.' }, undefined, undefined],
    ['the same host in upper case', { kind: 'client-hello', serverName: 'REGISTRY.npmjs.org' }, undefined, undefined],
    [
      'the same host with two final dots',
      { kind: 'client-hello', serverName: 'registry.npmjs.org..' },
      EGRESS_RULES.SniMismatch,
      '"registry.npmjs.org.." is not registry.npmjs.org',
    ],
    [
      'another host behind the same address',
      { kind: 'client-hello', serverName: 'evil.example' },
      EGRESS_RULES.SniMismatch,
      '"evil.example" is not registry.npmjs.org',
    ],
    [
      'a sub-domain of the host',
      { kind: 'client-hello', serverName: 'a.registry.npmjs.org' },
      EGRESS_RULES.SniMismatch,
      'is not registry.npmjs.org',
    ],
    [
      'a ClientHello the proxy cannot read',
      { kind: 'malformed', why: 'a TLS record of 0 bytes' },
      EGRESS_RULES.SniMismatch,
      'could not be read: a TLS record of 0 bytes',
    ],
  ] as const)('%s', (_why, hello, rule, message) => {
    const refusal = refusedServerName('registry.npmjs.org', hello);
    if (rule === undefined) expect(refusal).toBeUndefined();
    else expect(refusal).toMatchObject({ status: 403, rule, message: expect.stringContaining(message) });
  });

  // RFC 6066 wants a fully qualified name: Java sends no server name for `registry`.
  it('lets a ClientHello without a server name through to a single-label host, and checks one that names a server', () => {
    expect(refusedServerName('registry', { kind: 'client-hello' })).toBeUndefined();
    expect(refusedServerName('registry', { kind: 'client-hello', serverName: 'Registry.' })).toBeUndefined();
    expect(refusedServerName('registry', { kind: 'client-hello', serverName: 'registry.npmjs.org' })).toMatchObject({
      status: 403,
      rule: EGRESS_RULES.SniMismatch,
    });
    expect(refusedServerName('registry.test', { kind: 'client-hello' })).toMatchObject({ status: 403, rule: EGRESS_RULES.SniMissing });
  });

  it('refuses an SSLv2-format ClientHello, which names no server, even to a single-label host', () => {
    const cipherSpecs = Buffer.from('00c02f00009c00002f', 'hex');
    const body = Buffer.concat([Buffer.from([1, 3, 3, 0, cipherSpecs.length, 0, 0, 0, 32]), cipherSpecs, Buffer.alloc(32, 0x5a)]);
    const hello = readClientHello(Buffer.concat([Buffer.from([0x80, body.length]), body]));
    for (const host of ['registry.npmjs.org', 'registry']) {
      expect(refusedServerName(host, hello)).toMatchObject({
        status: 403,
        rule: EGRESS_RULES.SniMismatch,
        message: expect.stringContaining('SSLv2-format ClientHello, which carries no server name'),
      });
    }
  });
});

describe('refusedPlainHttpTunnel', () => {
  it('refuses a tunnel that starts with an HTTP request line, whatever its port', () => {
    expect(refusedPlainHttpTunnel('http-request')).toMatchObject({ status: 403, rule: EGRESS_RULES.PlainHttpTunnel });
  });
  it('lets another protocol through', () => {
    expect(refusedPlainHttpTunnel('not-http')).toBeUndefined();
  });
});

describe('classifyAddress', () => {
  it.each([
    ['8.8.8.8', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['127.0.0.53', 'loopback'],
    ['100.64.0.1', 'private'],
    ['100.100.100.200', 'metadata'],
    ['192.0.2.2', 'private'],
    ['224.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['::', 'reserved'],
    ['ff02::1', 'reserved'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['::ffff:127.0.0.1', 'loopback'],
    // Azure's WireServer, GCE's IPv6 metadata server (inside fc00::/7, which an admin may open).
    ['168.63.129.16', 'metadata'],
    ['fd20:ce::254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    // Forms that carry an IPv4 address: IPv4-translated is judged by it; local-use NAT64 and 6to4 never.
    ['::ffff:0:a9fe:a9fe', 'metadata'],
    ['::ffff:0:10.0.0.1', 'private'],
    ['64:ff9b:1::a9fe:a9fe', 'reserved'],
    ['2002:a9fe:a9fe::1', 'reserved'],
    // Site-local (fec0::/10, deprecated, still routed on some sites), at both ends of the range; beside it, link-local.
    ['fec0::1', 'private'],
    ['feff:ffff::1', 'private'],
    ['febf::1', 'link-local'],
    ['not an address', 'reserved'],
  ])('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });
});
