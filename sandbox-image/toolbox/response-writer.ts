// Writes one response line (contract/protocol.ts frames it, the id first). Writes wait for
// the pipe to drain so a slow reader never makes the toolbox buffer without bound.
import { encodeResponse } from './contract/protocol.ts';
import type { ToolResponse } from './contract/tool-results.ts';

export function writeResponse(output: NodeJS.WritableStream, id: unknown, response: ToolResponse): Promise<void> {
  const line = encodeResponse(id, response);
  return new Promise((resolve, reject) => {
    const flushed = output.write(line, (error) => (error ? reject(error) : undefined));
    if (flushed) resolve();
    else output.once('drain', () => resolve());
  });
}
