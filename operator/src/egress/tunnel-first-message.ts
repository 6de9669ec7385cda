// A tunnel's first message, gathered from the client's writes until it shows what it is: a TLS
// ClientHello (tls-client-hello.ts), a PROXY protocol header (proxy-protocol-header.ts), or
// bytes whose first line is or is not an HTTP request (http-request-line.ts). The proxy
// (egress-proxy-server.ts) holds them meanwhile and then judges them (decide-connection.ts).
// Pure: chunks in, a reading out.
//
// The bytes are read again only when a new chunk can change the answer: at every chunk while
// they may still be TLS (readClientHello walks at most a few record headers, whatever their
// length), then only when a chunk holds a byte that can settle the first line (mayDecide: a CR
// or LF after the first byte that is neither, as empty lines before a request are skipped; a
// NUL; a byte no method holds while the method is read) or the bytes reach
// REQUEST_LINE_MAX_BYTES. Read at every chunk, a line sent a byte per write was joined and
// scanned from its start 16 000 times: 5.5 s of CPU on the event loop every tunnel shares.
// The bytes gather in one buffer grown by doubling, so no chunk copies all that came before it.

import { REQUEST_LINE_MAX_BYTES, TARGET_START, readHttpRequestLine, type HttpRequestLineReading } from './http-request-line.ts';
import { readProxyProtocolHeader, type ProxyProtocolReading } from './proxy-protocol-header.ts';
import { readClientHello, type ClientHelloReading } from './tls-client-hello.ts';

export type TunnelFirstMessageReading =
  | { kind: 'incomplete' }
  | {
      kind: 'whole';
      /** Every byte the client sent so far, which goes on (or not) as one. */
      bytes: Buffer;
      hello: ClientHelloReading;
      /** `none` unless the bytes are not TLS. */
      proxyHeader: ProxyProtocolReading;
      /** `not-http` unless the bytes are neither TLS nor a PROXY header. */
      line: HttpRequestLineReading;
    };

const CR = 13;
const LF = 10;
const NUL = 0;
const SPACE = 32;
const TAB = 9;
/** The bytes of a method (an RFC 9110 token), as http-request-line.ts reads one. */
const TOKEN_BYTES = new Set(Buffer.from("!#$%&'*+.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-", 'latin1'));
const INCOMPLETE = { kind: 'incomplete' } as const;

export class TunnelFirstMessage {
  /** How many times the gathered bytes were read whole: what a client's many small writes must not multiply. */
  scans = 0;
  private buffer = Buffer.alloc(0);
  private length = 0;
  private mayBeTls = true;
  /** Whether a byte other than CR and LF has come: only a line end after it ends the first line. */
  private lineStarted = false;
  /** Which part of the first line is being read (http-request-line.ts), and how many bytes its method has. */
  private part: 'method' | 'spaces' | 'target' = 'method';
  private methodBytes = 0;

  push(chunk: Buffer): TunnelFirstMessageReading {
    this.append(chunk);
    const mayDecide = this.mayDecide(chunk);
    if (!this.mayBeTls && !mayDecide && this.length < REQUEST_LINE_MAX_BYTES) return INCOMPLETE;
    this.scans++;
    const bytes = this.buffer.subarray(0, this.length);
    const hello = readClientHello(bytes);
    this.mayBeTls = hello.kind === 'incomplete';
    if (hello.kind === 'incomplete') return INCOMPLETE;
    if (hello.kind !== 'not-tls') return { kind: 'whole', bytes, hello, proxyHeader: 'none', line: 'not-http' };
    const proxyHeader = readProxyProtocolHeader(bytes);
    if (proxyHeader === 'incomplete') return INCOMPLETE;
    const line = proxyHeader === 'proxy-protocol' ? 'not-http' : readHttpRequestLine(bytes);
    if (line === 'incomplete') return INCOMPLETE;
    return { kind: 'whole', bytes, hello, proxyHeader, line };
  }

  private append(chunk: Buffer) {
    const needed = this.length + chunk.length;
    if (needed > this.buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(needed, 2 * this.buffer.length, 1024));
      this.buffer.copy(grown, 0, 0, this.length);
      this.buffer = grown;
    }
    chunk.copy(this.buffer, this.length);
    this.length = needed;
  }

  /**
   * Whether the chunk holds a byte that can settle the first line (readHttpRequestLine decides
   * at each): a CR or LF ending it, a NUL (another protocol's: a Postgres SSLRequest or startup
   * message, a git daemon's request, which then wait for their answer with no line end), a
   * byte no method holds while the method is read, or a first byte of the target no target
   * starts with (an LDAP bind, 30 20 ...). Judged byte by byte as they come, so a
   * line sent a byte per write is read whole once, not at every byte.
   */
  private mayDecide(chunk: Buffer): boolean {
    for (const byte of chunk) {
      if (!this.lineStarted) {
        if (byte === CR || byte === LF) continue;
        this.lineStarted = true;
      }
      if (byte === CR || byte === LF || byte === NUL) return true;
      if (this.part === 'target') continue;
      if (this.part === 'spaces') {
        if (byte === SPACE || byte === TAB) continue;
        if (!TARGET_START.test(String.fromCharCode(byte))) return true;
        this.part = 'target';
        continue;
      }
      if (TOKEN_BYTES.has(byte)) {
        this.methodBytes++;
        continue;
      }
      if ((byte === SPACE || byte === TAB) && this.methodBytes > 0) {
        this.part = 'spaces';
        continue;
      }
      return true;
    }
    return false;
  }
}
