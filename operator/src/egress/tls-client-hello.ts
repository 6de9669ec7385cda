// The server name (SNI) a TLS client asks for, read from the first bytes it sends through a
// tunnel: the ClientHello travels in clear. Behind one address (a CDN, an ingress) the server
// name picks the site, as the Host header does for plain HTTP, so a tunnel opened to a listed
// host could otherwise reach any site sharing its address (decide-connection.ts,
// refusedServerName). Pure: bytes in, what they say out.
//
// The layout (RFC 8446 §4.1.2, RFC 6066 §3): records of [type 22][version 2][length 2], whose
// fragments joined make the handshake message [type 1][length 3][body]; the body is version,
// random, session id, cipher suites, compression methods, then extensions, where type 0 is
// server_name: a list of [name type 0][length 2][host name].
//
// What the proxy cannot check it refuses rather than passes: TLS that starts with a record
// other than a handshake (servers such as Go's crypto/tls skip a warning alert before the
// ClientHello, so an alert first would carry any hello past the check), and a ClientHello with
// Encrypted Client Hello, whose outer server name is whatever the client chose while the site
// served is the encrypted inner one. A first byte that is a TLS record type (20-24) is TLS
// whatever follows it: Go's crypto/tls takes a first record of any version below 0x1000, so a
// hello whose version bytes were 00 01 went through as "not TLS", unchecked, and was served.
// No other protocol a tunnel carries starts with one of these control bytes.

export type ClientHelloReading =
  /** More bytes are needed to know. */
  | { kind: 'incomplete' }
  /** The first byte is not a TLS record type: another protocol, which the proxy does not read. */
  | { kind: 'not-tls' }
  | { kind: 'client-hello'; serverName?: string }
  /** TLS that does not start with a ClientHello the proxy can read and check. */
  | { kind: 'malformed'; why: string };

const HANDSHAKE_RECORD = 22;
/** The other TLS record types (RFC 8446 §5.1, RFC 6520): a stream starting with one is TLS too, not a ClientHello. */
const OTHER_RECORD_TYPES: ReadonlyMap<number, string> = new Map([
  [20, 'a change_cipher_spec'],
  [21, 'an alert'],
  [23, 'an application_data'],
  [24, 'a heartbeat'],
]);
const CLIENT_HELLO = 1;
const SERVER_NAME_EXTENSION = 0;
/** encrypted_client_hello (draft-ietf-tls-esni). */
const ENCRYPTED_CLIENT_HELLO_EXTENSION = 0xfe0d;
const HOST_NAME = 0;

/**
 * The largest ClientHello waited for. Today's run to 2 KiB (a post-quantum key share is the
 * bulk); a record holds at most 16 KiB, and a hello spread over more is not one a client sends.
 */
export const CLIENT_HELLO_MAX_BYTES = 16 * 1024;

/** What the first bytes a client sent through a tunnel say about the server name it asks for. */
export function readClientHello(bytes: Buffer): ClientHelloReading {
  if (bytes.length === 0) return { kind: 'incomplete' };
  const otherRecord = OTHER_RECORD_TYPES.get(bytes[0]!);
  if (otherRecord !== undefined) return { kind: 'malformed', why: `the tunnel's TLS starts with ${otherRecord} record, not a ClientHello` };
  if (bytes[0] !== HANDSHAKE_RECORD) return { kind: 'not-tls' };
  // Join the handshake fragments of the records that have arrived.
  const fragments: Buffer[] = [];
  let joined = 0;
  let offset = 0;
  let needed: number | undefined;
  while (needed === undefined || joined < needed) {
    if (bytes.length < offset + 2) return { kind: 'incomplete' };
    if (bytes[offset] !== HANDSHAKE_RECORD) return { kind: 'malformed', why: 'the ClientHello is cut by a record of another type' };
    // Every client sends version 3.x (SSL 3.0 to TLS 1.3); a server may read another, the proxy does not.
    if (bytes[offset + 1] !== 3) return { kind: 'malformed', why: `a TLS record of version ${bytes[offset + 1]}.x, which no client sends` };
    if (bytes.length < offset + 5) return { kind: 'incomplete' };
    const length = bytes.readUInt16BE(offset + 3);
    if (length === 0 || length > 16_384) return { kind: 'malformed', why: `a TLS record of ${length} bytes` };
    if (bytes.length < offset + 5 + length) return { kind: 'incomplete' };
    // Real clients send the hello in one record; a few more are allowed, not thousands of one byte.
    if (fragments.length === 8) return { kind: 'malformed', why: 'a ClientHello spread over more than 8 records' };
    fragments.push(bytes.subarray(offset + 5, offset + 5 + length));
    joined += length;
    offset += 5 + length;
    if (needed === undefined && joined >= 4) {
      const head = Buffer.concat(fragments);
      if (head[0] !== CLIENT_HELLO) return { kind: 'malformed', why: `handshake message type ${head[0]}, not a ClientHello` };
      needed = 4 + head.readUIntBE(1, 3);
      if (needed > CLIENT_HELLO_MAX_BYTES) return { kind: 'malformed', why: `a ClientHello of ${needed} bytes` };
    }
  }
  return parseClientHello(Buffer.concat(fragments).subarray(4, needed));
}

function parseClientHello(body: Buffer): ClientHelloReading {
  const malformed = { kind: 'malformed', why: 'the ClientHello ends inside one of its fields' } as const;
  let at = 2 + 32; // version, random
  const skip = (lengthBytes: 1 | 2) => {
    if (body.length < at + lengthBytes) return false;
    at += lengthBytes + body.readUIntBE(at, lengthBytes);
    return at <= body.length;
  };
  if (!skip(1) || !skip(2) || !skip(1)) return malformed; // session id, cipher suites, compression methods
  if (at === body.length) return { kind: 'client-hello' }; // no extensions at all
  if (body.length < at + 2) return malformed;
  const end = at + 2 + body.readUInt16BE(at);
  if (end > body.length) return malformed;
  at += 2;
  let serverName: string | undefined;
  // Every extension is read: Encrypted Client Hello may come after the server name.
  while (at + 4 <= end) {
    const type = body.readUInt16BE(at);
    const length = body.readUInt16BE(at + 2);
    const data = body.subarray(at + 4, at + 4 + length);
    if (data.length !== length) return malformed;
    at += 4 + length;
    if (type === ENCRYPTED_CLIENT_HELLO_EXTENSION) {
      return { kind: 'malformed', why: 'it carries Encrypted Client Hello, which hides the server name the destination will serve' };
    }
    if (type !== SERVER_NAME_EXTENSION || serverName !== undefined) continue;
    // The list holds one name in practice (one host_name at most, RFC 6066); the first counts.
    if (data.length < 5 || data[2] !== HOST_NAME) return { kind: 'malformed', why: 'a server_name extension without a host name' };
    const nameLength = data.readUInt16BE(3);
    if (data.length < 5 + nameLength) return malformed;
    serverName = data.subarray(5, 5 + nameLength).toString('latin1');
  }
  return serverName === undefined ? { kind: 'client-hello' } : { kind: 'client-hello', serverName };
}
