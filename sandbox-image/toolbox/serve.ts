// `serve`: newline-delimited requests with an id, answered with the same id in any order,
// until stdin closes. One process answers many calls, so a worker pays the node start and the
// exec round trip once per session instead of once per tool call.
import { REQUEST_MAX_BYTES } from './contract/limits.ts';
import { idFromLinePrefix, LineSplitter } from './contract/protocol.ts';
import { dispatch, parseRequest, ProtocolError } from './tool-dispatch.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { writeResponse } from './response-writer.ts';

export async function serve(context: ToolboxContext, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  const inFlight = new Set<Promise<void>>();

  const handle = (line: string) => {
    let request;
    try {
      request = parseRequest(line);
    } catch (error) {
      // The session survives a bad line: answer it (with its id when one can be found).
      const message = error instanceof ProtocolError ? error.message : String(error);
      void writeResponse(output, idFromLinePrefix(line) ?? null, {
        ok: false,
        error: { code: 'INVALID_INPUT', message: `protocol: ${message}` },
      });
      return;
    }
    const { id, tool, input: toolInput, callId, protect, clean } = request;
    const work = dispatch(context, tool, toolInput, callId, { protect, clean }).then((response) => writeResponse(output, id, response));
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  const splitter = new LineSplitter(REQUEST_MAX_BYTES, {
    line: handle,
    oversized: (prefix) =>
      void writeResponse(output, idFromLinePrefix(prefix) ?? null, {
        ok: false,
        error: { code: 'TOO_LARGE', message: 'protocol: request line too long' },
      }),
  });
  for await (const chunk of input) splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  splitter.end();
  while (inFlight.size > 0) await Promise.all([...inFlight]);
}
