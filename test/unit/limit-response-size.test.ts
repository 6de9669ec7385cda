import { describe, expect, it, vi } from 'vitest';
import { ModelResponseTooLargeError, limitResponseSize } from '../../operator/src/providers/limit-response-size.ts';

/** A fetch answering with `chunks` as the body (endless when `chunks` is a function), recording whether the body was cancelled. */
function fetchOf(chunks: readonly string[] | ((index: number) => string), headers: Record<string, string> = {}) {
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
    return new Response(body, { status: 200, headers });
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
});
