// A TLS ClientHello later in a tunnel whose first bytes were not TLS. Protocols that start TLS
// inside themselves send their hello after a plaintext preamble: Postgres's SSLRequest (the
// server answers `S`), MySQL's SSL request, SMTP, IMAP and XMPP's STARTTLS, a PROXY protocol
// header. A server that then routes by the hello's server name (Neon's Postgres proxy) serves
// the site it names: read on the first message only (egress-proxy-server.ts), a tunnel opened
// to a listed database reached any database behind its address. So the client's first
// STARTTLS_WINDOW_BYTES are searched for a ClientHello starting anywhere in them, whatever
// came before it and however its bytes arrive (one write with the preamble, or in pieces), and
// each one found is judged as a first message's hello is (decide-connection.ts,
// refusedServerName). Pure: bytes in, what may go on and what was found out.
//
// What is taken for a ClientHello: a handshake record (22) of a version some server reads
// (3.x, any minor: rustls and OpenSSL take them all; below 16.x: Go's crypto/tls takes a first
// record of any version below 0x1000), a record length of 1 or more, handshake type 1, a
// declared length a server could take; then the bytes from there decide.
// - Records as clients send them (3.0 to 3.4) are judged as a first message is
//   (readClientHello): a hello the proxy cannot read is refused, as an evasion needs one
//   (padded past 16 KiB, spread over more than 8 records, with Encrypted Client Hello). One
//   declaring more than 16 KiB is refused only once a record header follows its first record,
//   as such a hello must go on in another record: a MySQL client's COM_STMT_EXECUTE of 790
//   bytes for statement 257 starts `16 03 00 00 17 01 01 00 00`, a hello of 64 KiB. Random
//   bytes start such a record about once in 860 million positions, and with a length a server
//   takes once in 110 billion: about one tunnel in 850 000 sending 128 KiB of them (an SSH
//   session's) is refused.
// - Records no client sends are first read as a server reads them (readServedClientHello:
//   records of any length, a hello of up to 128 KiB): random bytes start one 800 times as
//   often, mostly with lengths no client sends, so refusing them for those would refuse one
//   such tunnel in 1 000. Bytes that a server would take for a hello are then judged as a
//   first message's (so refused, whatever they name, when a client would not send them); bytes
//   whose fields or records no server takes (Go, OpenSSL and rustls refuse a hello whose fields
//   overrun it) are no hello. A hello spread past WATCHED_MAX_BYTES, over more than 8 records or
//   with an empty one is refused unread. Random bytes after such a start were refused 6 times
//   in 400 000: one tunnel in 70 million sending 128 KiB of them.
// Plaintext carrying a whole ClientHello naming another host (a captured handshake sent in
// clear) is refused too; that is never a protocol's own traffic.
//
// Holding: the bytes of a possible hello of a client's kind do not go on until it is judged
// (as a first message's do not), so a hello that would be refused never reaches the server
// whole; a client whose bytes start one and then waits for an answer stalls until the record
// they start shows otherwise. One of a kind no client sends is watched instead, its bytes
// going on, and judged as the write that completes it arrives, before that write goes on:
// holding those would stall the honest streams that start one by chance. A server answers a
// ClientHello only once it is whole.
import {
  CLIENT_HELLO_MAX_BYTES,
  CLIENT_HELLO_MAX_SERVED,
  readClientHello,
  readServedClientHello,
  type ClientHelloReading,
} from './tls-client-hello.ts';

/**
 * How far into a tunnel the proxy looks for a ClientHello: 128 KiB of the client's bytes. The
 * preambles that come before TLS are short (Postgres's SSLRequest 8 bytes, MySQL's SSL request
 * 36, PROXY v1 at most 107, an SMTP or IMAP exchange a few hundred); the longest is a PROXY v2
 * header, at most 16 + 65 535 bytes, which this covers with a hello after it. Past it a tunnel
 * is relayed unread, as before: a client may still send a longer preamble to a server that
 * takes one (SMTP's NOOPs), which the proxy does not follow (docs/egress.md). The cost to an
 * honest tunnel is a byte search over its first 128 KiB, and the odds of its bytes looking
 * like a hello grow with the window.
 */
export const STARTTLS_WINDOW_BYTES = 128 * 1024;

/** A hello's record header (5) and handshake header (4), which a match needs to be judged. */
const HEADERS_BYTES = 9;
const HANDSHAKE_RECORD = 22;
/** The most room a held hello's buffer keeps for the writes to come. */
const SPARE_MAX_BYTES = 16 * 1024;
const CLIENT_HELLO = 1;
/** Never written to: a scan owns only the buffers it allocates itself. */
const EMPTY = Buffer.alloc(0);
/**
 * The most bytes a possible hello of a record version no client sends is kept for while its
 * records arrive: past them it is refused unread, as one spread over more than 8 records is.
 * Its first record may declare up to 64 KiB, so random bytes get this far only when a second
 * record header follows by chance (one in 800); a client sends no such records at all. It
 * bounds what a tunnel keeps: a hello of a client's record versions is held up to 32 KiB (16 KiB
 * of hello, and the rest of its record).
 */
export const WATCHED_MAX_BYTES = 96 * 1024;
/**
 * Possible hellos read whole in one tunnel (a copy of up to 128 KiB and a parse apiece) before
 * it is refused. Only those count, not every position that starts like one: a MySQL client
 * executing statement 1 with one 8-byte parameter sends `16 00 00 00 17 01 00 00 00` in every
 * packet, a handshake record of 23 bytes starting a hello (of 65 536 bytes for statement 257,
 * which the next packet shows is none); counting those refused a prepared-statement loop at its
 * 65th execution. Honest streams carry one or two whole hellos (the STARTTLS one, a decoy);
 * more takes bytes crafted for it, or a plaintext upload of captured handshakes.
 */
export const STARTTLS_WHOLE_HELLOS_MAX = 64;

/** A ClientHello found: one naming a server, or one the proxy could not read. */
export type FoundClientHello = Extract<ClientHelloReading, { kind: 'client-hello' | 'malformed' }>;

export type StartTlsScanStep<Refusal> =
  /** Send `forward` on; later bytes are still read. */
  | { kind: 'scanning'; forward: Buffer }
  /** Send `forward` on, and every later byte unread: the window is over. */
  | { kind: 'done'; forward: Buffer }
  /** A hello was refused: nothing more goes on. */
  | { kind: 'refused'; refusal: Refusal };

type Match =
  /** No hello; `readWhole` when its bytes were read to the end of what it declared. */
  { kind: 'no'; readWhole: boolean } | { kind: 'incomplete'; clientShaped: boolean } | { kind: 'hello'; hello: FoundClientHello };

/**
 * Whether the bytes from a 22 start like a ClientHello: 'too-short' when its first bytes have
 * not all come (the next write decides).
 */
function startsLikeHello(bytes: Buffer): 'too-short' | 'no' | 'yes' {
  if (bytes.length < 2) return 'too-short';
  if (bytes[1]! >= 0x10) return 'no';
  if (bytes.length < 6) return 'too-short';
  const recordLength = bytes.readUInt16BE(3);
  if (recordLength === 0 || bytes[5] !== CLIENT_HELLO) return 'no';
  // A handshake header cut by a record boundary is a client's choice no honest one makes: judged without this check.
  if (recordLength >= 4) {
    if (bytes.length < HEADERS_BYTES) return 'too-short';
    if (bytes.readUIntBE(6, 3) > CLIENT_HELLO_MAX_SERVED) return 'no';
  }
  return 'yes';
}

/**
 * Whether a hello of a client's record version goes on past its first record when it must: one
 * declaring more than CLIENT_HELLO_MAX_BYTES does not fit in a record a client sends, so the
 * first record's end is followed by a record header (a type of 20 to 24, a version some server
 * reads) or the bytes are no TLS. 'too-short' until those 5 bytes have come (the first record
 * is at most 16 KiB: what is held stays bounded). 'yes' for any other hello: readClientHello
 * judges it as it is.
 */
function goesOnPastFirstRecord(bytes: Buffer): 'too-short' | 'no' | 'yes' {
  const recordLength = bytes.readUInt16BE(3);
  // A header cut by the record's end is followed by a record already; a record longer than a
  // client's is refused for that.
  if (recordLength < 4 || recordLength > CLIENT_HELLO_MAX_BYTES) return 'yes';
  if (4 + bytes.readUIntBE(6, 3) <= CLIENT_HELLO_MAX_BYTES) return 'yes';
  const next = 5 + recordLength;
  if (bytes.length < next + 5) return 'too-short';
  const type = bytes[next]!;
  return type >= 20 && type <= 24 && bytes[next + 1]! < 0x10 ? 'yes' : 'no';
}

/** Whether bytes that start like a ClientHello are one, and whether it is whole. */
function readMatch(bytes: Buffer): Match {
  if (bytes[1] === 3 && bytes[2]! <= 4) {
    const goesOn = goesOnPastFirstRecord(bytes);
    if (goesOn === 'too-short') return { kind: 'incomplete', clientShaped: true };
    if (goesOn === 'no') return { kind: 'no', readWhole: false };
    const reading = readClientHello(bytes);
    if (reading.kind === 'incomplete') return { kind: 'incomplete', clientShaped: true };
    return reading.kind === 'not-tls' ? { kind: 'no', readWhole: false } : { kind: 'hello', hello: reading };
  }
  const served = readServedClientHello(bytes);
  if (served.kind === 'incomplete') {
    if (bytes.length <= WATCHED_MAX_BYTES) return { kind: 'incomplete', clientShaped: false };
    const why = `a ClientHello of a record version no client sends, its records running past ${WATCHED_MAX_BYTES} bytes`;
    return { kind: 'hello', hello: { kind: 'malformed', why } };
  }
  if (served.kind === 'not-tls' || served.kind === 'unserved') return { kind: 'no', readWhole: served.kind === 'unserved' };
  // A hello a server takes: judged as a first message's, which refuses one of these records.
  const reading = readClientHello(bytes);
  return { kind: 'hello', hello: reading.kind === 'client-hello' || reading.kind === 'malformed' ? reading : served };
}

/**
 * The client's bytes of one tunnel, pushed as they arrive; `judge` says whether a hello found
 * is refused (decide-connection.ts, refusedServerName, for the tunnel's host). After a hello
 * that passes, the search goes on to the window's end: a hello naming the listed host may be
 * a decoy inside a preamble (an SMTP EHLO's argument), with the one the server reads after it.
 */
export class StartTlsHelloScan<Refusal> {
  /** Bytes kept: bytes[index] is the client's byte at offset start + index. */
  private bytes: Buffer = EMPTY;
  private start = 0;
  private length = 0;
  /** Whether `bytes` is this scan's own copy, into whose spare room a write may be appended. */
  private owned = false;
  /** The offset up to which bytes have gone on. */
  private sent = 0;
  /** The next offset that may start a hello. */
  private next = 0;
  /** Bytes from `next` are held: a possible hello of a client's kind starts there. */
  private waiting = false;
  /** A possible hello of a kind no client sends, not held, judged once whole. */
  private watched: number | undefined;
  /** Possible hellos read whole so far (STARTTLS_WHOLE_HELLOS_MAX). */
  private wholeHellos = 0;
  private finished = false;

  constructor(
    private readonly judge: (hello: FoundClientHello) => Refusal | undefined,
    private readonly windowBytes = STARTTLS_WINDOW_BYTES,
  ) {}

  /** Whether bytes are held: a client that ends now ends inside what may be a ClientHello. */
  get holding(): boolean {
    return this.waiting;
  }

  /** The client's next bytes: what may go on, or the refusal. After 'done' or 'refused', push nothing more. */
  push(chunk: Buffer): StartTlsScanStep<Refusal> {
    if (this.finished) throw new Error('StartTlsHelloScan.push after the scan ended');
    this.append(chunk);
    const end = this.start + this.length;
    if (this.watched !== undefined) {
      const match = readMatch(this.bytes.subarray(this.watched - this.start, this.length));
      if (match.kind !== 'incomplete') {
        this.watched = undefined;
        const ended = this.judgeMatch(match, end);
        if (ended) return ended;
      }
    }
    this.waiting = false;
    while (this.next < Math.min(end, this.windowBytes)) {
      const at = this.bytes.indexOf(HANDSHAKE_RECORD, this.next - this.start);
      if (at === -1) {
        this.next = end;
        break;
      }
      this.next = this.start + at;
      if (this.next >= this.windowBytes) break;
      const bytes = this.bytes.subarray(at, this.length);
      const start = startsLikeHello(bytes);
      // Not held: no byte of a hello beyond its first eight has gone on, and a stream that
      // ends a write with a 22 (one in 256) must not wait for its next one.
      if (start === 'too-short') break;
      if (start === 'no') {
        this.next++;
        continue;
      }
      const match = readMatch(bytes);
      if (match.kind === 'incomplete') {
        if (match.clientShaped || this.watched !== undefined) {
          this.waiting = true;
          break;
        }
        this.watched = this.next;
      } else {
        const ended = this.judgeMatch(match, end);
        if (ended) return ended;
      }
      this.next++;
    }
    if (!this.waiting && this.watched === undefined && this.next >= this.windowBytes) return this.finish(end);
    const forward = this.release(this.waiting ? Math.max(this.sent, this.next) : end);
    // Nothing needed any more: the write is not kept while the tunnel idles.
    if (Math.min(this.next, this.sent, this.watched ?? Infinity) >= end) this.drop(end);
    return { kind: 'scanning', forward };
  }

  /**
   * Judges a match that waits for no more bytes: the scan's end when it is a refused hello, or
   * the one read whole past STARTTLS_WHOLE_HELLOS_MAX (refused too, unless `judge` passes what
   * it cannot read); undefined to read on.
   */
  private judgeMatch(match: Exclude<Match, { kind: 'incomplete' }>, end: number): StartTlsScanStep<Refusal> | undefined {
    const refusal = match.kind === 'hello' ? this.judge(match.hello) : undefined;
    if (refusal !== undefined) return this.refuse(refusal);
    if (match.kind === 'no' && !match.readWhole) return undefined;
    if (++this.wholeHellos <= STARTTLS_WHOLE_HELLOS_MAX) return undefined;
    const tooMany = this.judge({
      kind: 'malformed',
      why: `the tunnel's first ${this.windowBytes} bytes carry more than ${STARTTLS_WHOLE_HELLOS_MAX} possible ClientHellos`,
    });
    return tooMany === undefined ? this.finish(end) : this.refuse(tooMany);
  }

  private drop(end: number): void {
    this.bytes = EMPTY;
    this.start = end;
    this.length = 0;
    this.owned = false;
  }

  private finish(end: number): StartTlsScanStep<Refusal> {
    const forward = this.release(end);
    this.finished = true;
    this.drop(end);
    return { kind: 'done', forward };
  }

  private refuse(refusal: Refusal): StartTlsScanStep<Refusal> {
    this.finished = true;
    this.drop(this.start + this.length);
    return { kind: 'refused', refusal };
  }

  /** The bytes from `sent` up to `upTo`, now gone on. */
  private release(upTo: number): Buffer {
    const forward = this.bytes.subarray(this.sent - this.start, upTo - this.start);
    this.sent = upTo;
    return forward;
  }

  /**
   * Adds a write after what is still needed (from the earliest of: a possible hello, a match
   * still too short to tell, what has not gone on). Nothing needed: the write itself, uncopied.
   * The bytes of a released range are never overwritten (the socket may still be writing them):
   * a write is appended past them, or everything moves to a new buffer.
   */
  private append(chunk: Buffer): void {
    const keepFrom = Math.min(this.next, this.sent, this.watched ?? Infinity);
    const end = this.start + this.length;
    const kept = end - keepFrom;
    if (kept <= 0) {
      this.bytes = chunk;
      this.start = end;
      this.length = chunk.length;
      this.owned = false;
      return;
    }
    if (this.owned && this.length + chunk.length <= this.bytes.length) {
      chunk.copy(this.bytes, this.length);
      this.length += chunk.length;
      return;
    }
    // Room to spare while a hello is awaited, so one arriving a byte at a time is not copied whole for each.
    const needed = kept + chunk.length;
    const spare = this.waiting || this.watched !== undefined ? Math.min(needed, SPARE_MAX_BYTES) : 0;
    const grown = Buffer.allocUnsafe(needed + spare);
    this.bytes.copy(grown, 0, keepFrom - this.start, this.length);
    chunk.copy(grown, kept);
    this.bytes = grown;
    this.start = keepFrom;
    this.length = needed;
    this.owned = true;
  }
}
