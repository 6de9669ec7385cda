// The operator's reading of a toolbox response line. The framing (line splitting with a
// bound, the request encoder, the response decoder, the id of a cut line) is the contract's,
// shared with the toolbox: sandbox-image/toolbox/contract/protocol.ts. A line that is not a
// response makes the session untrustworthy: SandboxError('PROTOCOL'), and so does a line of
// more items than any answer holds, refused before it is parsed (json/json-scan.ts).
import { decodeResponse } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { countJsonItems, RESPONSE_MAX_JSON_ITEMS } from '../json/json-scan.ts';
import { SandboxError } from './sandbox-error.ts';

export interface ParsedResponse {
  id: unknown;
  response: ToolResponse;
}

/** Validates one response line; throws SandboxError('PROTOCOL') when it is not one, or is too many items to parse. */
export function parseResponseLine(line: string): ParsedResponse {
  if (countJsonItems(line, RESPONSE_MAX_JSON_ITEMS) > RESPONSE_MAX_JSON_ITEMS) {
    throw new SandboxError(
      'PROTOCOL',
      `toolbox answered a line of more than ${RESPONSE_MAX_JSON_ITEMS} objects, arrays and members, more than any answer of the contract`,
    );
  }
  const reading = decodeResponse(line);
  if (reading.kind === 'invalid') throw new SandboxError('PROTOCOL', `toolbox answered ${reading.message}`);
  return { id: reading.id, response: reading.response };
}
