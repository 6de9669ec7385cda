// A fetch whose response bodies end with an error past a size bound. The SDK reads a whole
// non-streamed answer into memory and allows up to 2 GiB, so an endpoint that answers
// without end (or with a huge error page) would grow the operator until it is killed, and
// with it every run of the replica. No real model answer comes near the bound: the largest
// (a write_file of a big file) is limited to 32 MiB by the toolbox anyway.

export const MODEL_RESPONSE_MAX_BYTES = 16 * 1_048_576;

const name = 'ModelResponseTooLargeError';
const symbol = Symbol.for(`chamvi.error.${name}`);

/** Ends a body past the bound; the SDK wraps it, classify-model-error.ts reports it. */
export class ModelResponseTooLargeError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly maxBytes: number;

  constructor(maxBytes: number) {
    super(`the answer is larger than ${Math.round(maxBytes / 1_048_576)} MiB, the most the operator reads from a model`);
    this.maxBytes = maxBytes;
  }

  static isInstance(error: unknown): error is ModelResponseTooLargeError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}

export function limitResponseSize(fetch: typeof globalThis.fetch, maxBytes: number = MODEL_RESPONSE_MAX_BYTES): typeof globalThis.fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const rebuilt = (body: ReadableStream<Uint8Array>) =>
      new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    if (Number(response.headers.get('content-length')) > maxBytes) {
      // Announced too large: not a byte of it is read.
      await response.body.cancel().catch(() => undefined);
      return rebuilt(new ReadableStream({ start: (controller) => controller.error(new ModelResponseTooLargeError(maxBytes)) }));
    }
    let received = 0;
    return rebuilt(
      response.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            received += chunk.byteLength;
            // Erroring the writable side makes the pipe cancel the source: the download stops.
            if (received > maxBytes) controller.error(new ModelResponseTooLargeError(maxBytes));
            else controller.enqueue(chunk);
          },
        }),
      ),
    );
  };
}
