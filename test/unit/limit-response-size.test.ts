import { describe, expect, it, vi } from 'vitest';
import {
  MODEL_RESPONSE_MAX_JSON_ITEMS,
  ModelResponseTooLargeError,
  ModelResponseTooManyItemsError,
  limitResponseSize,
} from '../../operator/src/providers/limit-response-size.ts';
import { countJsonItems } from '../../operator/src/json/json-scan.ts';

/** A fetch answering with `chunks` as the body (endless when `chunks` is a function), recording whether the body was cancelled. */
function fetchOf(chunks: readonly string[] | ((index: number) => string), headers: Record<string, string> = {}, status = 200) {
  const seen = { cancelled: false };
  const fetch = (async () => {
    let index = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const chunk = typeof chunks === 'function' ? chunks(index++) : chunks[index++];
        if (chunk === undefined) controller.close();
        else controller.enqueue(new TextEncoder().encode(chunk));
      },
      cancel() {
        seen.cancelled = true;
      },
    });
    return new Response(body, { status, headers });
  }) as typeof globalThis.fetch;
  return { fetch, seen };
}

describe('limitResponseSize', () => {
  it('passes a body within the bound through unchanged, with its status and headers', async () => {
    const { fetch } = fetchOf(['{"a":', '1}'], { 'x-request-id': 'r1' });
    const response = await limitResponseSize(fetch, 10)('http://model.test');
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toBe('r1');
    expect(await response.text()).toBe('{"a":1}');
  });

  it('errors a body that never ends at the bound and cancels the download', async () => {
    const { fetch, seen } = fetchOf(() => 'x'.repeat(1000));
    const response = await limitResponseSize(fetch, 10_000)('http://model.test');
    const error = await response.text().catch((e: unknown) => e);
    expect(ModelResponseTooLargeError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/larger than/);
    // Node 24 cancels the piped source a task after the reader sees the error, not before.
    await vi.waitFor(() => expect(seen.cancelled).toBe(true), { timeout: 1_000 });
  });

  it('refuses a body whose Content-Length is past the bound without reading it', async () => {
    const { fetch, seen } = fetchOf(['x'.repeat(100)], { 'content-length': '100' });
    const response = await limitResponseSize(fetch, 10)('http://model.test');
    const error = await response.text().catch((e: unknown) => e);
    expect(ModelResponseTooLargeError.isInstance(error)).toBe(true);
    expect(seen.cancelled).toBe(true);
  });

  it('ends a JSON body of more objects, arrays and members than any answer holds, well inside the byte bound', async () => {
    // 2 MiB of `[[[…` held about 58 MiB of heap once parsed; `[{},{},…]` 45 MiB.
    const json = { 'content-type': 'application/json; charset=utf-8' };
    for (const shape of ['[', '{},']) {
      const { fetch, seen } = fetchOf((index) => (index === 0 ? '{"extra":[' : shape.repeat(1_000)), json);
      const response = await limitResponseSize(fetch)('http://model.test');
      const error = await response.text().catch((e: unknown) => e);
      expect(ModelResponseTooManyItemsError.isInstance(error)).toBe(true);
      await vi.waitFor(() => expect(seen.cancelled).toBe(true), { timeout: 1_000 });
    }
  });

  it('counts no bracket inside a string: an answer of long code passes whole', async () => {
    const code = JSON.stringify('function f() { return [[1, 2], {a: "[{,"}]; }\n'.repeat(20_000));
    const body = `{"choices":[{"message":{"tool_calls":[{"function":{"arguments":${JSON.stringify(code)}}}]}}]}`;
    expect(countJsonItems(body)).toBeLessThan(10);
    const chunks = body.match(/[\s\S]{1,7}/g)!;
    const { fetch } = fetchOf(chunks, { 'content-type': 'application/json' });
    expect(await (await limitResponseSize(fetch)('http://model.test')).text()).toBe(body);
  });

  // What the SDK posts: doStream adds `"stream":true` at the top of the body, doGenerate leaves it out.
  const messages = [{ role: 'user', content: 'answer with "stream":true' }];
  const streamed = { method: 'POST', body: JSON.stringify({ model: 'm', messages, stream: true }) };
  const whole = { method: 'POST', body: JSON.stringify({ model: 'm', messages }) };
  const manyItems = (index: number) => (index === 0 ? '{"extra":[' : '{},'.repeat(1_000));

  it('leaves the answer to a streamed request uncounted: its event framing is not one JSON text', async () => {
    const events = Array.from({ length: MODEL_RESPONSE_MAX_JSON_ITEMS }, () => 'data: {"a":[1,2]}\n\n');
    const { fetch } = fetchOf([events.join('')], { 'content-type': 'text/event-stream' });
    expect((await (await limitResponseSize(fetch)('http://model.test', streamed)).text()).length).toBe(events.join('').length);
  });

  // The SDK parses a whole answer as JSON whatever it is labelled: the label chooses nothing.
  it.each([['text/plain'], ['text/event-stream'], ['text/html'], [undefined]])(
    'counts the items of the answer to a request that asked for no stream, labelled %s',
    async (contentType) => {
      const { fetch, seen } = fetchOf(manyItems, contentType === undefined ? {} : { 'content-type': contentType });
      const response = await limitResponseSize(fetch)('http://model.test', whole);
      const error = await response.text().catch((e: unknown) => e);
      expect(ModelResponseTooManyItemsError.isInstance(error)).toBe(true);
      await vi.waitFor(() => expect(seen.cancelled).toBe(true), { timeout: 1_000 });
    },
  );

  it('counts the items of an error body to a streamed request: the SDK parses it as one JSON text', async () => {
    const { fetch } = fetchOf(manyItems, { 'content-type': 'text/event-stream' }, 500);
    const response = await limitResponseSize(fetch)('http://model.test', streamed);
    expect(ModelResponseTooManyItemsError.isInstance(await response.text().catch((e: unknown) => e))).toBe(true);
  });
});
