// Whether the first bytes through a tunnel are an HTTP request (http-request-line.ts): the
// request lines servers take, however loosely written, against other protocols' first bytes.
import { describe, expect, it } from 'vitest';
import { REQUEST_LINE_MAX_BYTES, readHttpRequestLine } from '../../operator/src/egress/http-request-line.ts';

const read = (text: string) => readHttpRequestLine(Buffer.from(text, 'latin1'));

describe('readHttpRequestLine', () => {
  it.each([
    ['a GET', 'GET / HTTP/1.1\r\nHost: other.test\r\n\r\n'],
    ['a POST in absolute form', 'POST http://other.test/x HTTP/1.0\r\n'],
    ['a request after empty lines, which a server skips', '\r\n\n\r\nGET / HTTP/1.1\r\n'],
    ['a request line ended by LF alone', 'GET / HTTP/1.1\nHost: other.test\n\n'],
    ['a request line ended by CR alone', 'GET / HTTP/1.1\rHost: other.test'],
    ['several spaces and tabs', 'GET \t /  HTTP/1.1\r\n'],
    ['a method of any token, in lower case, and a version in lower case', 'purge /x http/1.1\r\n'],
    ["h2c's preface, which picks a site by :authority", 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
    ['a target with bytes beyond ASCII', 'GET /caf\xe9 HTTP/1.1\r\n'],
    // nginx before 1.21.1 served a target holding control characters; none takes a NUL.
    ['a target holding a control character', 'GET /\x01admin HTTP/1.1\r\nHost: other.test\r\n\r\n'],
    ['a target holding DEL and a vertical tab', 'GET /a\x7fb\x0bc HTTP/1.1\r\n'],
  ])('reads %s as an HTTP request', (_what, text) => {
    expect(read(text)).toBe('http-request');
  });

  it.each([
    ['an SSH banner', 'SSH-2.0-OpenSSH_9.6\r\n'],
    ['an SSH banner with a comment', 'SSH-2.0-OpenSSH_9.6 Ubuntu-3ubuntu13\r\n'],
    ['an SMTP command', 'EHLO mail.test\r\n'],
    ["PostgreSQL's SSLRequest", '\x00\x00\x00\x08\x04\xd2\x16\x2f'],
    ["git's protocol, whose pkt-line carries a NUL", '0033git-upload-pack /p.git\x00host=other.test\x00'],
    ['HTTP/0.9, which has no Host to choose a site by', 'GET /\r\n'],
    ['a space first', ' GET / HTTP/1.1\r\n'],
    ['a TLS record', '\x16\x03\x01\x02\x00'],
    // Decided at the target's first byte, with no line end to wait for: an LDAP bind waits for its answer.
    ['a token byte, a space and a byte no target starts with (an LDAP bind)', '0 \x02\x01\x01`\x1b\x02\x01\x03\x04\x0ecn=admin'],
    ['a method whose target starts with a control character', 'X \x01\x02\x03'],
  ])('reads %s as not HTTP', (_what, text) => {
    expect(read(text)).toBe('not-http');
  });

  it('reads a line whose method and space are followed by a NUL as not HTTP at once, as a git daemon request waits for its answer', () => {
    expect(read('0033git-upload-pack /p.git\x00')).toBe('not-http');
  });

  it('waits for the end of a line holding a control character other than NUL, which a server may still take', () => {
    expect(read('GET /\x01admin HTTP/1.')).toBe('incomplete');
  });

  it('waits for the rest of a request line cut anywhere before its end', () => {
    const line = '\r\nGET /index.html HTTP/1.1';
    for (let length = 0; length <= line.length; length++) expect(read(line.slice(0, length))).toBe('incomplete');
  });

  it(`takes a first line still unfinished after ${REQUEST_LINE_MAX_BYTES} bytes for a request, not for another protocol`, () => {
    expect(read(`GET /${'a'.repeat(REQUEST_LINE_MAX_BYTES)}`)).toBe('http-request');
    expect(read(`GET /${'a'.repeat(REQUEST_LINE_MAX_BYTES - 10)}`)).toBe('incomplete');
    expect(read('\r\n'.repeat(REQUEST_LINE_MAX_BYTES))).toBe('http-request');
  });
});
