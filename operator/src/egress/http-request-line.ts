// Whether the first bytes a client sent through a tunnel are an HTTP request: a request line
// (RFC 9112 §3: method, target, version) whose version is HTTP/something. A CONNECT tunnel
// carries no plain HTTP (decide-connection.ts, refusedPlainHttpTunnel): through it the
// client's own Host header would reach a server that picks its site by it. Pure: bytes in,
// what they say out.
//
// Read as loosely as the servers it guards against read it, so that what one would take for a
// request is called one here: empty lines before it are skipped (RFC 9112 §2.2 lets a server
// skip them), a line ends at CR or LF, spaces may be several or tabs, the version is matched
// without regard to case and whatever its number (h2c's `PRI * HTTP/2.0` picks a site by its
// :authority too), and a control character other than NUL may sit in the target (nginx before
// 1.21.1 served one). Other protocols a tunnel carries (SSH, SMTP, a database's binary start)
// are told apart by their first line or first byte. A method and a space alone do not make a
// request: SMTP's `EHLO host`, an SSH banner with a comment and a git daemon's request start so.

export type HttpRequestLineReading = 'incomplete' | 'http-request' | 'not-http';

/**
 * The longest first line waited for. A request line longer still is taken for one: a server
 * may take a target of any length, and a request padded past the bound must not pass unread.
 */
export const REQUEST_LINE_MAX_BYTES = 16 * 1024;

const TOKEN_CHAR = /^[!#$%&'*+.^_`|~0-9A-Za-z-]$/;
/** The first character of a request target (RFC 9112 §3.2): /, *, a scheme's or host's letter or digit, [ of an IPv6 host. */
export const TARGET_START = /^[/*[A-Za-z0-9]$/;
const REQUEST_LINE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]+.*[ \t]HTTP\//i;

/** What the first bytes a client sent through a tunnel say: an HTTP request line, something else, or not yet known. */
export function readHttpRequestLine(bytes: Buffer): HttpRequestLineReading {
  let start = 0;
  while (start < bytes.length && start < REQUEST_LINE_MAX_BYTES && (bytes[start] === 13 || bytes[start] === 10)) start++;
  const text = bytes.subarray(start, REQUEST_LINE_MAX_BYTES).toString('latin1');
  let end = 0;
  let part: 'method' | 'spaces' | 'target' = 'method';
  for (; end < text.length; end++) {
    const char = text[end]!;
    if (char === '\r' || char === '\n') break;
    if (part === 'method') {
      if (TOKEN_CHAR.test(char)) continue;
      if ((char === ' ' || char === '\t') && end > 0) {
        part = 'spaces';
        continue;
      }
      return 'not-http';
    }
    if (part === 'spaces') {
      if (char === ' ' || char === '\t') continue;
      // A target starts as origin-form (/), asterisk-form (*), absolute-form (a scheme) or
      // authority-form (a host, [ for IPv6) does: a binary message whose second byte happens to
      // be a space (an LDAP bind: 30 20 ...) is not a request, and waits for its answer with no
      // line end.
      if (!TARGET_START.test(char)) return 'not-http';
      part = 'target';
      continue;
    }
    // A NUL after the method is another protocol's (a git daemon's request, which then waits
    // for its answer, so its line would never end). Other control characters in the target do
    // not end the reading: nginx before 1.21.1 served such a request.
    if (char === '\0') return 'not-http';
  }
  if (end === text.length) return start + text.length >= REQUEST_LINE_MAX_BYTES ? 'http-request' : 'incomplete';
  return REQUEST_LINE.test(text.slice(0, end)) ? 'http-request' : 'not-http';
}
