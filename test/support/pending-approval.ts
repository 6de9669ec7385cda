// status.pendingApproval as the operator writes it for a gated bash call with this input: the
// whole input with its size and sha256 (security #11.5), for tests of what the plugin shows.
import { createHash } from 'node:crypto';

export function pendingBash(input: string, requestedAt = '') {
  return {
    id: 's1-c1',
    toolName: 'bash',
    input,
    inputBytes: Buffer.byteLength(input),
    inputSha256: createHash('sha256').update(input).digest('hex'),
    requestedAt,
  };
}
