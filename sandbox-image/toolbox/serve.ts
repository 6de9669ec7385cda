// `serve`: newline-delimited requests with an id, answered with the same id in any order,
// until stdin closes. One process answers many calls, so a worker pays the node start and the
// exec round trip once per session instead of once per tool call. A session import's archive
// (contract/protocol.ts) comes in frames between two requests; session-import.ts reads it,
// and the requests after it are read once it is unpacked.
import { REQUEST_MAX_BYTES } from './contract/limits.ts';
import { decodeRequest, idFromLinePrefix, LineSplitter } from './contract/protocol.ts';
import { dispatch, ProtocolError } from './tool-dispatch.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { writeResponse } from './response-writer.ts';
import { SessionImport } from './session-import.ts';
import { killStoppedToolboxes } from './stopped-sessions.ts';

export async function serve(context: ToolboxContext, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  // An earlier session stopped from inside still holds its locks; their owners must be dead first.
  killStoppedToolboxes();
  const inFlight = new Set<Promise<void>>();
  const track = (work: Promise<void>) => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };
  let importing: SessionImport | undefined;

  const handle = (line: string): 'stop' | undefined => {
    const reading = decodeRequest(line);
    if (reading.kind === 'invalid') {
      // The session survives a bad line: answer it (with its id when one can be found).
      void writeResponse(output, idFromLinePrefix(line) ?? null, {
        ok: false,
        error: { code: 'INVALID_INPUT', message: `protocol: ${reading.message}` },
      });
      return undefined;
    }
    if (reading.kind === 'import') {
      importing = new SessionImport(context, reading.request, output);
      track(importing.answered);
      return 'stop'; // the bytes after this line are the archive's frames
    }
    const { id, tool, input: toolInput, callId, protect, clean, operatorEnvironment } = reading.request;
    track(
      dispatch(context, tool, toolInput, callId, { protect, clean, operatorEnvironment }).then((response) =>
        writeResponse(output, id, response),
      ),
    );
    return undefined;
  };

  const splitter = new LineSplitter(REQUEST_MAX_BYTES, {
    line: handle,
    oversized: (prefix) =>
      void writeResponse(output, idFromLinePrefix(prefix) ?? null, {
        ok: false,
        error: { code: 'TOO_LARGE', message: 'protocol: request line too long' },
      }),
  });
  let broken: ProtocolError | undefined;
  reading: for await (const received of input) {
    let chunk: Uint8Array | undefined = typeof received === 'string' ? Buffer.from(received) : received;
    while (chunk !== undefined && chunk.length > 0) {
      if (!importing) {
        chunk = splitter.push(chunk);
        continue;
      }
      try {
        chunk = await importing.push(chunk);
      } catch (error) {
        // A frame count that is not one: nothing after it can be told apart any more.
        broken = new ProtocolError(error instanceof Error ? error.message : String(error));
        break reading;
      }
      if (chunk === undefined) continue;
      // A request after the archive sees all of it: the next line is read once it is unpacked.
      await importing.answered;
      importing = undefined;
    }
  }
  if (importing) importing.end();
  else splitter.end();
  while (inFlight.size > 0) await Promise.all([...inFlight]);
  if (broken) throw broken;
}
