// The server name (SNI) a TLS client asks for, read from the first bytes it sends through a
// tunnel: the ClientHello travels in clear. Behind one address (a CDN, an ingress) the server
// name picks the site, as the Host header does for plain HTTP, so a tunnel opened to a listed
// host could otherwise reach any site sharing its address, and a hello without a server name
// leaves the site to what the proxy cannot see (decide-connection.ts, refusedServerName).
// The same reading judges a hello found later in a tunnel that did not start with TLS
// (starttls-hello-scan.ts), which first asks readServedClientHello whether its bytes are a
// hello some server would take at all. Pure: bytes in, what they say out.
//
// The layout (RFC 8446 §4.1.2, RFC 6066 §3): records of [type 22][version 2][length 2], whose
// fragments joined make the handshake message [type 1][length 3][body]; the body is version,
// random, session id, cipher suites, compression methods, then extensions, where type 0 is
// server_name: a list of [name type 0][length 2][host name].
//
// What the proxy cannot check it refuses rather than passes: TLS that starts with a record
// other than a handshake (servers such as Go's crypto/tls skip a warning alert before the
// ClientHello, so an alert first would carry any hello past the check), a record whose version
// is not 3.x (Go's crypto/tls takes a first record of any version below 0x1000, so a hello
// whose version bytes were 00 01 would otherwise pass as "not TLS", unchecked, and be served),
// a ClientHello with Encrypted Client Hello, whose outer server name is whatever the client
// chose while the site served is the encrypted inner one, a server_name extension that servers
// read differently (two of them, several names, an empty one: readServerName), and a
// ClientHello in the SSLv2 format, which has no extensions and so no server name
// (readSslV2ClientHello).
//
// Which bytes are TLS at all: those that read as a chain of records leading to a ClientHello,
// whatever their versions, or as an SSLv2-format ClientHello, since that is what a lenient
// server reads. A first byte of 20-24 alone does not make TLS: a length-prefixed protocol
// starts so by chance (a MongoDB message of 278 bytes starts 16 01 00 00, its length in
// little-endian), and its next bytes, read as records and a handshake message, are no
// ClientHello that any server would take. The hello's own client_version does not count: Go's
// crypto/tls ignores it when the hello lists supported_versions, so a hello of client_version
// 0.0 is served like any other.

export type ClientHelloReading =
  /** More bytes are needed to know. */
  | { kind: 'incomplete' }
  /** The bytes cannot be TLS records leading to a ClientHello: another protocol, which the proxy does not read. */
  | { kind: 'not-tls' }
  | { kind: 'client-hello'; serverName?: string }
  /** TLS that does not start with a ClientHello the proxy can read and check. */
  | { kind: 'malformed'; why: string };

/**
 * What readServedClientHello finds: as readClientHello, or a whole ClientHello no server takes,
 * as its fields run past its end (or past its extensions' end).
 */
export type ServedClientHelloReading = ClientHelloReading | { kind: 'unserved'; why: string };

const HANDSHAKE_RECORD = 22;
/** The other TLS record types (RFC 8446 §5.1, RFC 6520): TLS starting with one does not start with a ClientHello. */
const OTHER_RECORD_TYPES: ReadonlyMap<number, string> = new Map([
  [20, 'a change_cipher_spec'],
  [21, 'an alert'],
  [23, 'an application_data'],
  [24, 'a heartbeat'],
]);
const CLIENT_HELLO = 1;
/** The most a record may carry (RFC 8446 §5.2, 2^14 + 2048): a longer one is no TLS record. */
const RECORD_MAX_BYTES = 16_384 + 2048;
/** A record's plaintext bound (RFC 8446 §5.1): a client's first records are plaintext. */
const PLAINTEXT_MAX_BYTES = 16_384;
/** The shortest ClientHello body: version 2, random 32, and three empty-length fields (1, 2, 1). */
const CLIENT_HELLO_MIN_BODY = 2 + 32 + 1 + 2 + 1;
/**
 * Records read before the ClientHello is whole: real clients send one; a few more are allowed,
 * not thousands of one byte. With server limits too: bytes of another protocol never chain 9
 * TLS record headers by chance, and each read of a hello still arriving walks its records again.
 */
const RECORDS_MAX = 8;
/** The longest ClientHello its fields can add up to, which OpenSSL takes (CLIENT_HELLO_MAX_LENGTH); Go and rustls take 64 KiB. */
export const CLIENT_HELLO_MAX_SERVED = 131_396;
const SERVER_NAME_EXTENSION = 0;
/** encrypted_client_hello (draft-ietf-tls-esni). */
const ENCRYPTED_CLIENT_HELLO_EXTENSION = 0xfe0d;
const HOST_NAME = 0;
/** An SSLv2-format record's header: its first byte has the top bit set, then 15 bits of length. */
const SSL_V2_HEADER_BYTES = 2;
const SSL_V2_CLIENT_HELLO = 1;
/** The fixed fields of an SSLv2-format ClientHello: type 1, version 2, three lengths of 2. */
const SSL_V2_CLIENT_HELLO_FIXED = 1 + 2 + 3 * 2;

/**
 * The largest ClientHello waited for. Today's run to 2 KiB (a post-quantum key share is the
 * bulk); a record holds at most 16 KiB, and a hello spread over more is not one a client sends.
 */
export const CLIENT_HELLO_MAX_BYTES = 16 * 1024;

export interface ClientHelloReadOptions {
  /**
   * Read records of any version as clients' 3.x ones: whether bytes are a ClientHello that a
   * lenient server (Go's crypto/tls) would read, not whether the proxy can check it. A record
   * of another version still makes the hello malformed when read without this.
   */
  anyRecordVersion?: boolean;
}

/** What the first bytes a client sent through a tunnel say about the server name it asks for. */
export function readClientHello(bytes: Buffer, options: ClientHelloReadOptions = {}): ClientHelloReading {
  if (bytes.length > 0 && (bytes[0]! & 0x80) !== 0) return readSslV2ClientHello(bytes);
  const reading = readRecords(bytes, options.anyRecordVersion ? 'any-version' : 'client');
  // A hello whose fields overrun it is one the proxy cannot read: refused, as any such hello.
  return reading.kind === 'unserved' ? { kind: 'malformed', why: reading.why } : reading;
}

/**
 * Whether bytes are a ClientHello that the most lenient server would serve, read with servers'
 * limits rather than clients' habits: records of any version below 16.x (Go's crypto/tls takes
 * them all before the hello) and any length, other records between its fragments skipped (Go
 * skips a warning alert, OpenSSL 1.0 a heartbeat), a hello of up to CLIENT_HELLO_MAX_SERVED
 * bytes. A hello that a client would not send but a server would take is a `client-hello` (or
 * `malformed` when its extensions hide what it asks for, as readClientHello says), never `not-tls`.
 * More than RECORDS_MAX records, or an empty one, is `malformed` at once: bytes of another
 * protocol do not chain record headers that far by chance.
 */
export function readServedClientHello(bytes: Buffer): ServedClientHelloReading {
  return readRecords(bytes, 'server');
}

/** Whose limits a reading applies: a client's (judging the hello), the same of any record version, or a server's (is it a hello at all). */
type Limits = 'client' | 'any-version' | 'server';

function readRecords(bytes: Buffer, limits: Limits): ServedClientHelloReading {
  const server = limits === 'server';
  // Walk the records that have arrived, the last one perhaps in part, joining their handshake
  // fragments. What would make a server refuse the hello (refused) is noted and only counts
  // once the bytes are known to lead to a ClientHello: until then they may be another protocol.
  const fragments: Buffer[] = [];
  let joined = 0;
  let offset = 0;
  let records = 0;
  let needed: number | undefined;
  let refused: string | undefined;
  while (needed === undefined || joined < needed) {
    if (bytes.length < offset + 1) return { kind: 'incomplete' };
    const type = bytes[offset]!;
    const otherRecord = OTHER_RECORD_TYPES.get(type);
    if (type !== HANDSHAKE_RECORD && otherRecord === undefined) return { kind: 'not-tls' };
    if (bytes.length < offset + 5) return { kind: 'incomplete' };
    const length = bytes.readUInt16BE(offset + 3);
    if (server) {
      // Go bails out on a record of 16.x or more before the hello; OpenSSL and rustls take 3.x only.
      if (bytes[offset + 1]! >= 0x10) return { kind: 'not-tls' };
    } else if (length > RECORD_MAX_BYTES) {
      // Longer than any TLS record: another protocol, unless it carries (or goes on with) a
      // ClientHello, which a server that takes larger records (OpenSSL 1.0.2's big buffers)
      // would read, its server name unchecked.
      const tooLong = { kind: 'malformed', why: `a TLS record of ${length} bytes` } as const;
      if (needed !== undefined) return tooLong;
      if (type !== HANDSHAKE_RECORD) return { kind: 'not-tls' };
      const head = Buffer.concat([...fragments, bytes.subarray(offset + 5, offset + 9)]);
      if (head.length < 4) return { kind: 'incomplete' };
      return head[0] === CLIENT_HELLO && head.readUIntBE(1, 3) >= CLIENT_HELLO_MIN_BODY ? tooLong : { kind: 'not-tls' };
    }
    if (++records > RECORDS_MAX) return { kind: 'malformed', why: `more than ${RECORDS_MAX} TLS records before the ClientHello is whole` };
    if (!server) {
      // A record longer than a plaintext one is TLS no client sends before its hello.
      if (length > PLAINTEXT_MAX_BYTES) return { kind: 'malformed', why: `a TLS record of ${length} bytes` };
      if (otherRecord !== undefined) {
        refused ??=
          records === 1
            ? `the tunnel's TLS starts with ${otherRecord} record, not a ClientHello`
            : 'the ClientHello is cut by a record of another type';
      }
      // Every client sends version 3.x (SSL 3.0 to TLS 1.3); a server may read another, the proxy does not.
      if (bytes[offset + 1] !== 3 && limits === 'client')
        refused ??= `a TLS record of version ${bytes[offset + 1]}.x, which no client sends`;
    }
    if (length === 0) refused ??= 'an empty TLS record, which no client sends';
    const data = bytes.subarray(offset + 5, offset + 5 + length);
    if (type === HANDSHAKE_RECORD) {
      fragments.push(data);
      joined += data.length;
      if (needed === undefined && joined >= 4) {
        // The first handshake message decides: no server takes another one first, or a
        // ClientHello too short for its fixed fields.
        // The first fragment mostly holds the header whole: not copied again at every read of a hello still arriving.
        const head = fragments[0]!.length >= 4 ? fragments[0]! : Buffer.concat(fragments);
        const bodyLength = head.readUIntBE(1, 3);
        if (head[0] !== CLIENT_HELLO || bodyLength < CLIENT_HELLO_MIN_BODY) return { kind: 'not-tls' };
        needed = 4 + bodyLength;
        if (server && bodyLength > CLIENT_HELLO_MAX_SERVED) return { kind: 'not-tls' };
        if (!server && needed > CLIENT_HELLO_MAX_BYTES) refused ??= `a ClientHello of ${needed} bytes`;
      }
    }
    if (needed !== undefined && refused !== undefined) return { kind: 'malformed', why: refused };
    if (data.length < length) return { kind: 'incomplete' };
    offset += 5 + length;
  }
  return parseClientHello(Buffer.concat(fragments).subarray(4, needed));
}

/** The ClientHello's fields, then its extensions: `unserved` when they do not fit in it. */
function parseClientHello(body: Buffer): ServedClientHelloReading {
  const unserved = { kind: 'unserved', why: 'the ClientHello ends inside one of its fields' } as const;
  let at = 2 + 32; // version, random
  const skip = (lengthBytes: 1 | 2) => {
    if (body.length < at + lengthBytes) return false;
    at += lengthBytes + body.readUIntBE(at, lengthBytes);
    return at <= body.length;
  };
  if (!skip(1) || !skip(2) || !skip(1)) return unserved; // session id, cipher suites, compression methods
  if (at === body.length) return { kind: 'client-hello' }; // no extensions at all
  if (body.length < at + 2) return unserved;
  const end = at + 2 + body.readUInt16BE(at);
  if (end > body.length) return unserved;
  at += 2;
  // Every extension's bounds first: a hello whose extensions do not fit is none a server takes,
  // whatever the ones before say.
  const extensions: { type: number; data: Buffer }[] = [];
  while (at < end) {
    if (end < at + 4) return { kind: 'unserved', why: 'the ClientHello ends its extensions inside an extension header' };
    const type = body.readUInt16BE(at);
    const length = body.readUInt16BE(at + 2);
    // An extension that runs past the extensions' end holds a server name the proxy would
    // read and a server bounding its read by that end would not (and then serve its default site).
    if (end < at + 4 + length) return { kind: 'unserved', why: "an extension runs past the end of the ClientHello's extensions" };
    extensions.push({ type, data: body.subarray(at + 4, at + 4 + length) });
    at += 4 + length;
  }
  let serverName: string | undefined;
  // Every extension is read: Encrypted Client Hello may come after the server name.
  for (const { type, data } of extensions) {
    if (type === ENCRYPTED_CLIENT_HELLO_EXTENSION) {
      return { kind: 'malformed', why: 'it carries Encrypted Client Hello, which hides the server name the destination will serve' };
    }
    if (type !== SERVER_NAME_EXTENSION) continue;
    // Which of two a server reads is its own choice (Go and OpenSSL refuse the hello).
    if (serverName !== undefined) return { kind: 'malformed', why: 'two server_name extensions, of which a server may read either' };
    const read = readServerName(data);
    if (typeof read !== 'string') return read;
    serverName = read;
  }
  return serverName === undefined ? { kind: 'client-hello' } : { kind: 'client-hello', serverName };
}

type Malformed = Extract<ClientHelloReading, { kind: 'malformed' }>;

/**
 * The host name a server_name extension carries: [list length 2] then entries of [name type 1]
 * [length 2][name]. RFC 6066 allows one name of a type, and servers read other lists each
 * their own way (Go refuses a second host_name and skips other types to reach one, Squid takes
 * the first host_name, other parsers the last; OpenSSL takes the first entry), so a list that
 * is not exactly one non-empty host_name could name one site to the proxy and another to the
 * server.
 */
function readServerName(data: Buffer): string | Malformed {
  if (data.length < 2 || data.readUInt16BE(0) !== data.length - 2) {
    return { kind: 'malformed', why: "a server_name extension whose list length is not the extension's" };
  }
  if (data.length < 5 || data[2] !== HOST_NAME) return { kind: 'malformed', why: 'a server_name extension without a host name first' };
  const nameLength = data.readUInt16BE(3);
  if (data.length < 5 + nameLength) return { kind: 'malformed', why: 'the ClientHello ends inside one of its fields' };
  if (data.length > 5 + nameLength) {
    return { kind: 'malformed', why: 'a server_name extension listing more than one name, which servers read differently' };
  }
  if (nameLength === 0) return { kind: 'malformed', why: 'an empty server name, which no client sends' };
  return data.subarray(5).toString('latin1');
}

/**
 * A ClientHello in the SSLv2 format (RFC 5246 Appendix E.2), as the first bytes of a tunnel:
 * [0x80 | length high bits][length low] then [type 1][version 2][cipher specs length 2]
 * [session id length 2][challenge length 2] and those three fields. OpenSSL (3 too, which
 * answered one at `@SECLEVEL=0` with its default certificate) and a Java server with
 * SSLv2Hello on take it for a hello of TLS 1.2 or older when its version is 3.x. It has no
 * extensions, so no server name: it reads as malformed (refused), never as not TLS (passed on
 * unchecked).
 *
 * Only bytes a server would take count: a record long enough for the fixed fields, type 1,
 * version major 3, and the three fields within the record; other bytes whose first is 0x80 or
 * more stay another protocol (ONC RPC's record mark `80 00 01 03` of a 259-byte fragment, a
 * Thrift compact call `82 21 01 03 "get"`). The lengths are checked as their bytes arrive, so
 * a short message that cannot fit (that Thrift call, 8 bytes) is known as not TLS at once
 * rather than waiting for 11 bytes its client never sends.
 */
function readSslV2ClientHello(bytes: Buffer): ClientHelloReading {
  if (bytes.length < SSL_V2_HEADER_BYTES) return { kind: 'incomplete' };
  const length = bytes.readUInt16BE(0) & 0x7fff;
  if (length < SSL_V2_CLIENT_HELLO_FIXED) return { kind: 'not-tls' };
  const at = (index: number) => bytes[SSL_V2_HEADER_BYTES + index];
  if (at(0) === undefined) return { kind: 'incomplete' };
  if (at(0) !== SSL_V2_CLIENT_HELLO) return { kind: 'not-tls' };
  if (at(1) === undefined) return { kind: 'incomplete' };
  if (at(1) !== 3) return { kind: 'not-tls' };
  // The least the three fields can hold, from the length bytes that have arrived.
  let fields = 0;
  for (const index of [3, 5, 7]) fields += ((at(index) ?? 0) << 8) + (at(index + 1) ?? 0);
  if (SSL_V2_CLIENT_HELLO_FIXED + fields > length) return { kind: 'not-tls' };
  if (bytes.length < SSL_V2_HEADER_BYTES + SSL_V2_CLIENT_HELLO_FIXED) return { kind: 'incomplete' };
  return {
    kind: 'malformed',
    why: 'it is an SSLv2-format ClientHello, which carries no server name (SNI); send a TLS ClientHello (Java: without SSLv2Hello)',
  };
}
