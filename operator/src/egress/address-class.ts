// What kind of destination an IP address is, for the proxy's after-resolution check. Pure.
//
// A host name on the run's list can still resolve to an address inside the cluster (a DNS
// answer the run's author controls, or a name that simply lives there): the check is made on
// the address the proxy will connect to, never on the name alone. IPv6 addresses that carry an
// IPv4 address (embeddedIPv4) are judged as that address, and compared as it (decide-connection.ts,
// canonicalAddress): one list of such forms for both, or the API server's address written as
// NAT64 was judged public and compared unequal.
import { isIPv4, isIPv6 } from 'node:net';

export type AddressClass =
  /** An address on the internet: the only kind a run's list alone opens. */
  | 'public'
  /**
   * RFC 1918, shared (100.64/10), unique-local (fc00::/7), the deprecated site-local (fec0::/10),
   * documentation/test nets: an admin may name such destinations.
   */
  | 'private'
  /** 127/8, ::1: an admin may name such destinations (the tests' registry listens there). */
  | 'loopback'
  /** The cloud metadata services (169.254.169.254, fd00:ec2::254, fd20:ce::254, 100.100.100.200, Azure's 168.63.129.16): never. */
  | 'metadata'
  /** 169.254/16, fe80::/10: never. */
  | 'link-local'
  /** Unspecified, multicast, broadcast, documentation and other reserved ranges: never. */
  | 'reserved';

/** Classes an admin may open by naming the destination in allowPrivateDestinations; the rest are closed for everyone. */
export const OPENABLE_CLASSES: ReadonlySet<AddressClass> = new Set(['private', 'loopback']);

function ipv4Number(address: string): number {
  return address.split('.').reduce((value, octet) => value * 256 + Number(octet), 0);
}

const v4 = (cidr: string): [number, number] => {
  const [base, bits] = cidr.split('/') as [string, string];
  return [ipv4Number(base), Number(bits)];
};
const inV4 = (value: number, [base, bits]: [number, number]) =>
  bits === 0 || Math.floor(value / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits));

const V4_RANGES: ReadonlyArray<[AddressClass, [number, number]]> = [
  ['metadata', v4('169.254.169.254/32')],
  ['metadata', v4('100.100.100.200/32')],
  // Azure's WireServer (VM agent, extensions, health): a public address every Azure VM reaches.
  ['metadata', v4('168.63.129.16/32')],
  ['link-local', v4('169.254.0.0/16')],
  ['loopback', v4('127.0.0.0/8')],
  ['private', v4('10.0.0.0/8')],
  ['private', v4('172.16.0.0/12')],
  ['private', v4('192.168.0.0/16')],
  ['private', v4('100.64.0.0/10')],
  ['reserved', v4('0.0.0.0/8')],
  // Documentation and benchmarking ranges are never on the internet; test networks (and this
  // project's real-node machine) use them as private ones.
  ['private', v4('192.0.2.0/24')],
  ['private', v4('198.18.0.0/15')],
  ['private', v4('198.51.100.0/24')],
  ['private', v4('203.0.113.0/24')],
  ['reserved', v4('192.0.0.0/24')],
  ['reserved', v4('224.0.0.0/4')],
  ['reserved', v4('240.0.0.0/4')],
];

function classifyV4(address: string): AddressClass {
  const value = ipv4Number(address);
  return V4_RANGES.find(([, range]) => inV4(value, range))?.[0] ?? 'public';
}

/** The eight 16-bit groups of an IPv6 address (with an embedded dotted IPv4 tail). */
function ipv6Groups(address: string): number[] {
  let text = address.split('%')[0]!.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const value = ipv4Number(dotted[1]!);
    text = text.slice(0, dotted.index) + `${Math.floor(value / 65536).toString(16)}:${(value % 65536).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The IPv4 address an IPv6 address carries in its last 32 bits, in the forms that reach it:
 * ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible, deprecated; not :: or ::1), ::ffff:0:a.b.c.d
 * (translated) and 64:ff9b::a.b.c.d (NAT64's well-known prefix). Undefined for any other
 * address, and for an IPv4 address itself.
 */
export function embeddedIPv4(address: string): string | undefined {
  if (!isIPv6(address)) return undefined;
  const g = ipv6Groups(address);
  const zero = (from: number, to: number) => g.slice(from, to).every((group) => group === 0);
  const mapped = zero(0, 5) && g[5] === 0xffff;
  const compatible = zero(0, 6) && (g[6]! > 0 || g[7]! > 1);
  const translated = zero(0, 4) && g[4] === 0xffff && g[5] === 0;
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6);
  if (!mapped && !compatible && !translated && !nat64) return undefined;
  return `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
}

function classifyV6(address: string): AddressClass {
  const carried = embeddedIPv4(address);
  if (carried !== undefined) return classifyV4(carried);
  const g = ipv6Groups(address);
  const zeroUntil = (n: number) => g.slice(0, n).every((group) => group === 0);
  if (zeroUntil(7) && g[7] === 1) return 'loopback';
  if (zeroUntil(8)) return 'reserved';
  // AWS's fd00:ec2::254 and GCE's fd20:ce::254, inside fc00::/7 (which an admin may open).
  const zeroMiddle = g.slice(2, 7).every((group) => group === 0) && g[7] === 0x254;
  if (zeroMiddle && ((g[0] === 0xfd00 && g[1] === 0x0ec2) || (g[0] === 0xfd20 && g[1] === 0x00ce))) return 'metadata';
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link-local';
  if ((g[0]! & 0xfe00) === 0xfc00) return 'private';
  // Site-local (RFC 3879 deprecated it, but a network may still route it): a site's own addresses.
  if ((g[0]! & 0xffc0) === 0xfec0) return 'private';
  if ((g[0]! & 0xff00) === 0xff00) return 'reserved';
  // A local-use NAT64 prefix (64:ff9b:1::/48) and 6to4 (2002::/16) reach an IPv4 address where
  // such routing exists, in forms with no one place for it: never.
  if ((g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) || g[0] === 0x2002) return 'reserved';
  if (g[0] === 0x2001 && g[1] === 0x0db8) return 'reserved';
  return 'public';
}

/** The class of an IP address; anything that is not one is 'reserved' (refused). */
export function classifyAddress(address: string): AddressClass {
  if (isIPv4(address)) return classifyV4(address);
  if (isIPv6(address)) return classifyV6(address);
  return 'reserved';
}
