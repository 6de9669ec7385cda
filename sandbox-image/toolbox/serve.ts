// `serve`: newline-delimited requests with an id, answered with the same id in any order,
// until stdin closes. One process answers many calls, so a worker pays the node start and the
// exec round trip once per session instead of once per tool call.
import { StringDecoder } from 'node:string_decoder';
import { REQUEST_MAX_BYTES } from './contract/limits.ts';
import { dispatch, parseRequest, ProtocolError } from './tool-dispatch.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { writeLine } from './response-writer.ts';

export async function serve(context: ToolboxContext, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let discarding = false;

  const handle = (line: string) => {
    if (line.trim() === '') return;
    let request;
    try {
      request = parseRequest(line);
    } catch (error) {
      // The session survives a bad line: answer it (with its id when one can be found).
      const id = idOf(line);
      const message = error instanceof ProtocolError ? error.message : String(error);
      void writeLine(output, { id, ok: false, error: { code: 'INVALID_INPUT', message: `protocol: ${message}` } });
      return;
    }
    const { id, tool, input: toolInput } = request;
    const work = dispatch(context, tool, toolInput).then((response) => writeLine(output, { id, ...response }));
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  for await (const chunk of input) {
    let text = decoder.write(chunk as Buffer);
    while (text.length > 0) {
      const newline = text.indexOf('\n');
      const piece = newline === -1 ? text : text.slice(0, newline);
      if (!discarding) {
        pending += piece;
        if (pending.length > REQUEST_MAX_BYTES) {
          void writeLine(output, { id: idOf(pending), ok: false, error: { code: 'TOO_LARGE', message: 'protocol: request line too long' } });
          pending = '';
          discarding = true;
        }
      }
      if (newline === -1) break;
      if (!discarding) handle(pending);
      pending = '';
      discarding = false;
      text = text.slice(newline + 1);
    }
  }
  if (!discarding && pending !== '') handle(pending);
  while (inFlight.size > 0) await Promise.all([...inFlight]);
}

/** The id of a request line that could not be parsed, when its start shows one. */
function idOf(line: string): unknown {
  const match = /^\s*\{\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})/.exec(line);
  if (!match) return null;
  try {
    return JSON.parse(match[1] as string);
  } catch {
    return null;
  }
}
