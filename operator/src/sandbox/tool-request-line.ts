// The request line a ToolRequest goes to the toolbox as, for both transports that send one (a
// kept session, serve-session.ts; a process per call, one-shot-call.ts), so a field added to
// ToolRequest reaches the toolbox by either or by neither: when each copied the fields itself,
// operatorEnvironment had to be added to both by hand, and one missed would have run the same
// call differently by transport. Fields are copied by name, not spread, so nothing else the
// caller's object holds reaches the wire; the `satisfies` makes a ToolRequest field left out
// here a type error. Pure.
import { encodeRequest } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolRequest } from './sandbox.ts';

/** `request`'s line, with `id` first when there is one (serve: the id its answer repeats; call: none). */
export function toolRequestLine(request: ToolRequest, id?: number): string {
  const fields = {
    tool: request.tool,
    input: request.input,
    callId: request.callId,
    protect: request.protect,
    clean: request.clean,
    operatorEnvironment: request.operatorEnvironment,
  } satisfies Record<keyof ToolRequest, unknown>;
  // JSON.stringify leaves out an undefined id, as it does an undefined callId.
  return encodeRequest({ id, ...fields });
}
