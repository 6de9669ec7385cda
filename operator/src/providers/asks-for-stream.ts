// Whether a model request asks for a streamed answer, read from the request the operator sends,
// not from the answer: the SDK's doStream puts `"stream":true` at the top of the JSON body it
// posts (Chat Completions and Responses alike), its doGenerate leaves `stream` out, and each
// reads the answer its own way whatever Content-Type the endpoint gives it
// (limit-response-size.ts). One pass over the body without parsing it: a request holds the
// whole conversation, megabytes a parse would copy onto the heap for one flag.

import { closingQuote } from '../json/json-scan.ts';

const QUOTE = 0x22;
// `{` `[` and `}` `]` differ only in bit 0x20 (as in json/json-scan.ts).
const CASE_BIT = 0x20;
const OPENING = 0x7b;
const CLOSING = 0x7d;
/** After the key: optional blanks, the colon, optional blanks, `true`. */
const TRUE_VALUE = /^[ \t\n\r]*:[ \t\n\r]*true/;

/**
 * True when `body` is JSON text whose top-level object has a member `stream` that is `true`.
 * A `stream` member nested deeper (a tool's schema, provider options) or inside a string (a
 * prompt that mentions it) does not count. Anything but a string body (the SDK always posts a
 * string) is not a stream request.
 */
export function asksForStream(body: unknown): boolean {
  // The common case, a request for a whole answer, in one search: without the key written
  // plainly (escaped in a string it reads \"stream\") no member can be it.
  if (typeof body !== 'string' || !body.includes('"stream"')) return false;
  let depth = 0;
  for (let at = 0; at < body.length; at++) {
    const code = body.charCodeAt(at);
    if (code === QUOTE) {
      const end = closingQuote(body, at + 1);
      if (depth === 1 && end - at === 7 && body.startsWith('stream', at + 1) && TRUE_VALUE.test(body.slice(end + 1, end + 16))) return true;
      at = end;
    } else if ((code | CASE_BIT) === OPENING) depth++;
    else if ((code | CASE_BIT) === CLOSING) depth--;
  }
  return false;
}
