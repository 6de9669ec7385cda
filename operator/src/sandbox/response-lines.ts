// The operator's reading of a toolbox response line. The framing (line splitting with a
// bound, the request encoder, the response decoder, the id of a cut line) is the contract's,
// shared with the toolbox: sandbox-image/toolbox/contract/protocol.ts. A line that is not a
// response makes the session untrustworthy: SandboxError('PROTOCOL'), and so does a line of
// more items than any answer holds, or nested deeper than any answer is, refused before it is
// parsed (json/json-scan.ts).
import { decodeResponse } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { JsonScan, RESPONSE_MAX_JSON_ITEMS } from '../json/json-scan.ts';
import { SandboxError } from './sandbox-error.ts';

/**
 * How deep objects and arrays may nest in a response line. The contract's answers nest five
 * levels at most (the line, read_file's `result`, its `instructions`, their `sources`, a
 * source: contract/tool-results.ts). What reads a result after the parse recurses
 * (agent/fit-tool-result.ts's JSON.stringify): a 120 KB line nested 60 000 deep overflowed its
 * stack with a RangeError, not a SandboxError, and the step was retried ten times into
 * AgentFailed.
 */
export const RESPONSE_MAX_JSON_DEPTH = 64;

export interface ParsedResponse {
  id: unknown;
  response: ToolResponse;
}

/**
 * Validates one response line; throws SandboxError('PROTOCOL') when it is not one, or is too
 * many items, or nested too deep, to parse.
 */
export function parseResponseLine(line: string): ParsedResponse {
  const scan = new JsonScan(RESPONSE_MAX_JSON_ITEMS);
  if (scan.text(line) > RESPONSE_MAX_JSON_ITEMS) {
    throw new SandboxError(
      'PROTOCOL',
      `toolbox answered a line of more than ${RESPONSE_MAX_JSON_ITEMS} objects, arrays and members, more than any answer of the contract`,
    );
  }
  if (scan.deepest > RESPONSE_MAX_JSON_DEPTH) {
    throw new SandboxError(
      'PROTOCOL',
      `toolbox answered a line nested more than ${RESPONSE_MAX_JSON_DEPTH} levels deep, deeper than any answer of the contract`,
    );
  }
  const reading = decodeResponse(line);
  if (reading.kind === 'invalid') throw new SandboxError('PROTOCOL', `toolbox answered ${reading.message}`);
  return { id: reading.id, response: reading.response };
}
