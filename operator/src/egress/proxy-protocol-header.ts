// Whether the first bytes a client sent through a tunnel are a PROXY protocol header (HAProxy's
// proxy-protocol.txt): a v1 line `PROXY TCP4 <source> <destination> <ports>\r\n` or the v2
// binary header, which starts with a fixed 12-byte signature. A server that takes such a header
// believes the source address it claims, and reads what follows as if the header were not
// there, so a tunnel may not carry one (decide-connection.ts, refusedProxyProtocolTunnel): the
// proxy is the destination's client of record, and what follows the header (plain HTTP, whose
// Host picks the site) is what the first-line check (http-request-line.ts) would not see.
// Pure: bytes in, what they say out.
//
// Matched exactly, as servers match them (HAProxy, nginx, Go's go-proxyproto): from the first
// byte, v1 in upper case with its space.

export type ProxyProtocolReading = 'incomplete' | 'proxy-protocol' | 'none';

const V1_PREFIX = Buffer.from('PROXY ', 'latin1');
const V2_SIGNATURE = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

/** Whether the first bytes through a tunnel start a PROXY protocol header, do not, or are too few to tell. */
export function readProxyProtocolHeader(bytes: Buffer): ProxyProtocolReading {
  const readings = [V1_PREFIX, V2_SIGNATURE].map((prefix) => {
    const length = Math.min(bytes.length, prefix.length);
    if (!bytes.subarray(0, length).equals(prefix.subarray(0, length))) return 'none';
    return length === prefix.length ? 'proxy-protocol' : 'incomplete';
  });
  if (readings.includes('proxy-protocol')) return 'proxy-protocol';
  return readings.includes('incomplete') ? 'incomplete' : 'none';
}
