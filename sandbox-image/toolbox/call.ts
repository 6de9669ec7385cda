// `call`: one request line in, one response line out, exit 0 for a tool result and a tool
// error alike. It stops reading at the first newline instead of waiting for end of input,
// because exec over older WebSocket protocols cannot close stdin.
import { REQUEST_MAX_BYTES } from './contract/limits.ts';
import { LineSplitter } from './contract/protocol.ts';
import { dispatch, parseRequest, ProtocolError } from './tool-dispatch.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { writeResponse } from './response-writer.ts';

export async function callOnce(context: ToolboxContext, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  const line = await readFirstLine(input);
  const request = parseRequest(line);
  const response = await dispatch(context, request.tool, request.input, request.callId, request);
  await writeResponse(output, request.id, response);
}

async function readFirstLine(input: NodeJS.ReadableStream): Promise<string> {
  let first: string | undefined;
  let tooLong = false;
  const splitter = new LineSplitter(REQUEST_MAX_BYTES, {
    line: (line) => {
      first ??= line;
    },
    oversized: () => (tooLong = true),
  });
  for await (const chunk of input) {
    splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    if (tooLong) throw new ProtocolError('request line too long');
    if (first !== undefined) return first;
  }
  splitter.end();
  if (first === undefined) throw new ProtocolError('no request on stdin');
  return first;
}
