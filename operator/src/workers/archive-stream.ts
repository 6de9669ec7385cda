// A workspace archive read for a sandbox import, one import frame per read. Each read goes out
// as one frame, and over exec as one WebSocket message; the operator's CPU per MiB sent
// (framing, masking, TLS writes, the garbage of each) grows with their number. Node's default
// of 64 KiB made sixteen per MiB: a 43.6 MB archive cost the operator 0.5–0.8 s of CPU, against
// 0.25–0.37 s read a MiB at a time (docs/benchmarks.md, "An archive through exec").
import { createReadStream, type ReadStream } from 'node:fs';
import { IMPORT_FRAME_MAX_BYTES } from '../../../sandbox-image/toolbox/contract/protocol.ts';

export function archiveReadStream(path: string): ReadStream {
  return createReadStream(path, { highWaterMark: IMPORT_FRAME_MAX_BYTES });
}
