// Whether a model request asks for a streamed answer, as limit-response-size.ts decides how to
// read the answer (operator/src/providers/asks-for-stream.ts).
import { describe, expect, it } from 'vitest';
import { asksForStream } from '../../operator/src/providers/asks-for-stream.ts';

const messages = [{ role: 'user', content: 'Fix the bug.' }];
const tools = [
  { type: 'function', function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

describe('asksForStream', () => {
  it.each([
    ['the SDK doStream body (Chat Completions)', { model: 'm', messages, tools, stream: true, stream_options: { include_usage: true } }],
    ['the SDK doStream body (Responses)', { model: 'm', input: messages, stream: true }],
    ['stream first', { stream: true, model: 'm', messages }],
  ])('is true for %s', (_, body) => {
    expect(asksForStream(JSON.stringify(body))).toBe(true);
  });

  it('reads a body written with blanks around the colon', () => {
    expect(asksForStream('{ "model": "m",\n  "stream" :\ttrue\n}')).toBe(true);
  });

  it.each([
    ['the SDK doGenerate body, no stream member', { model: 'm', messages, tools }],
    ['stream false', { model: 'm', messages, stream: false }],
    ['stream nested in a member', { model: 'm', messages, provider: { stream: true } }],
    ['stream nested in an array', { model: 'm', messages: [{ stream: true }] }],
    ['stream:true inside a prompt', { model: 'm', messages: [{ role: 'user', content: '{"stream":true}' }] }],
    ['a prompt ending in an escaped backslash before stream', { model: 'm', messages: [{ role: 'user', content: 'a\\' }], x: 'stream' }],
    ['a member whose name only starts with stream', { model: 'm', streaming: true }],
    ['stream the string "true"', { model: 'm', stream: 'true' }],
  ])('is false for %s', (_, body) => {
    expect(asksForStream(JSON.stringify(body))).toBe(false);
  });

  it('is false for a body that is not a string, and for none', () => {
    expect(asksForStream(undefined)).toBe(false);
    expect(asksForStream(new TextEncoder().encode('{"stream":true}'))).toBe(false);
  });
});
