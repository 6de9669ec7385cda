// A fetch whose response bodies end with an error past a size bound. The SDK reads a whole
// non-streamed answer into memory and allows up to 2 GiB, so an endpoint that answers
// without end (or with a huge error page) would grow the operator until it is killed, and
// with it every run of the replica.
import { JsonScan, RESPONSE_MAX_JSON_ITEMS } from '../json/json-scan.ts';
import { asksForStream } from './asks-for-stream.ts';

/**
 * 2 MiB. No model answers more: the most output tokens any model gives in one answer is about
 * 128 000, some 512 KB of code, which JSON escaping inside a tool call's arguments brings to
 * under 1 MiB (the steps ask for whole answers; a stream's framing would take more). What an answer costs the heap while the provider parses it and the SDK works on
 * it was measured with the step's generateText: 2.3 bytes a byte of plain text, 3.8 a byte of
 * the costliest shape, thousands of tiny tool calls. Every worker slot of a replica
 * (workerConcurrency, 8) may be reading one at once, beside a live set of about 70 MiB, in
 * the chart's 160 MiB heap (heapLimitMiB): 8 answers of 2 MiB of tool calls held 61 MiB and
 * fitted; of 3 MiB (or 4 MiB of plain text), the operator ran out of heap. 16 MiB, the bound
 * before, did at 8 plain-text answers. Raise heapLimitMiB with workerConcurrency.
 */
export const MODEL_RESPONSE_MAX_BYTES = 2 * 1_048_576;

const name = 'ModelResponseTooLargeError';
const symbol = Symbol.for(`chamvi.error.${name}`);
const itemsName = 'ModelResponseTooManyItemsError';
const itemsSymbol = Symbol.for(`chamvi.error.${itemsName}`);

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

/**
 * Objects, arrays and members a JSON answer may hold (json/json-scan.ts counts them as
 * the bytes arrive, outside strings). An answer's own structure is a few hundred even with 65
 * tool calls (their arguments are strings); the bytes bound alone let a hostile endpoint's 2 MiB
 * of `[[[…]]]` or `[{},{},…]` hold 30 to 60 MiB of heap once parsed, three of them at once past
 * the chart's heap. At this bound a parse holds a few MiB. Counted in every body the SDK parses
 * as one JSON text: the answer to a request that did not ask for a stream, and any error body.
 * Which is which is told by the request (asks-for-stream.ts), never by the answer's
 * Content-Type: the SDK parses a whole answer as JSON whatever the endpoint labels it, and
 * 20 000 tool calls sent as text/plain reached it, four such answers at once running the
 * operator out of heap. A streamed answer's event framing is not one JSON text: it is not
 * counted (the operator's steps never stream; the bytes bound still holds).
 */
export const MODEL_RESPONSE_MAX_JSON_ITEMS = RESPONSE_MAX_JSON_ITEMS;

/** Ends a body read as JSON that holds more items than the bound; the SDK wraps it, classify-model-error.ts reports it as a bad answer. */
export class ModelResponseTooManyItemsError extends Error {
  private readonly [itemsSymbol] = true;
  override readonly name = itemsName;

  constructor(maxItems: number) {
    super(`the answer holds more than ${maxItems} JSON objects, arrays and members, more than any model answer`);
  }

  static isInstance(error: unknown): error is ModelResponseTooManyItemsError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[itemsSymbol] === true;
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
    const parsedWhole = !response.ok || !asksForStream(init?.body);
    const tally = parsedWhole ? new JsonScan(MODEL_RESPONSE_MAX_JSON_ITEMS) : undefined;
    return rebuilt(
      response.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            received += chunk.byteLength;
            // Erroring the writable side makes the pipe cancel the source: the download stops.
            if (received > maxBytes) controller.error(new ModelResponseTooLargeError(maxBytes));
            else if (tally && tally.bytes(chunk) > MODEL_RESPONSE_MAX_JSON_ITEMS)
              controller.error(new ModelResponseTooManyItemsError(MODEL_RESPONSE_MAX_JSON_ITEMS));
            else controller.enqueue(chunk);
          },
        }),
      ),
    );
  };
}
