// `call`: one request line in, one response line out, exit 0 for a tool result and a tool
// error alike. It stops reading at the first newline instead of waiting for end of input,
// because exec over older WebSocket protocols cannot close stdin.
import { REQUEST_MAX_BYTES } from './contract/limits.ts';
import { dispatch, parseRequest, ProtocolError } from './tool-dispatch.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { writeLine } from './response-writer.ts';

export async function callOnce(context: ToolboxContext, input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  const line = await readFirstLine(input);
  const request = parseRequest(line);
  const response = await dispatch(context, request.tool, request.input);
  await writeLine(output, request.id === undefined ? response : { id: request.id, ...response });
}

async function readFirstLine(input: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of input) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const newline = buffer.indexOf(0x0a);
    if (newline !== -1) {
      chunks.push(buffer.subarray(0, newline));
      break;
    }
    chunks.push(buffer);
    length += buffer.length;
    if (length > REQUEST_MAX_BYTES) throw new ProtocolError('request line too long');
  }
  const line = Buffer.concat(chunks).toString('utf8');
  if (line.trim() === '') throw new ProtocolError('no request on stdin');
  return line;
}
