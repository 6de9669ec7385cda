// The download direction of a CONNECT tunnel: what the destination sends, written to the
// sandbox's socket from one buffer the tunnel reuses for every read.
//
// Why not upstream.pipe(client): a piped socket allocates a fresh 64 KiB buffer for every
// read, and those allocations are what the proxy spent its time on (profiled with
// `node --cpu-prof` under `make bench-egress`: garbage collection, forced by the external
// memory, cost more CPU than writing the bytes; each collection marks the whole heap, so the
// bigger the process the worse). With node:net's `onread` the reads land in a buffer of our
// own, which is safe to reuse as soon as the kernel has taken the previous write; until it has,
// the upstream socket stops reading, which is the same back-pressure pipe() gives.
//
// A tunnel gets a buffer of its own once its destination's bytes flow: a read the client's
// socket took whole. Until then it reads into one landing buffer all tunnels share, and writes
// a copy of each read: many tunnels (a package manager's kept connections, a sandbox that reads
// nothing) sit open without anything flowing, and each held 64 KiB for nothing, on top of what
// it had waiting to be written. Sharing is safe: a read and its callback run together, on the
// one thread, and the copy leaves nothing in the landing buffer for a later read to overwrite.
//
// The byte counts of the audit stay the sockets' own (bytesRead, bytesWritten): exact, and
// independent of how the bytes are moved.
import { connect, type Socket, type TcpNetConnectOpts } from 'node:net';

/** One read's worth: what a socket hands over per read by default (libuv's 64 KiB). */
export const TUNNEL_READ_BUFFER_BYTES = 64 * 1024;

let landing: Buffer | undefined;

/**
 * Connect to the destination with its reads relayed to `client`. While a write is still in
 * flight (the kernel took only part of it), the buffer it points into is not reused: reading
 * pauses until the write completes.
 */
export function connectRelayedTo(client: Socket, options: TcpNetConnectOpts, bufferBytes = TUNNEL_READ_BUFFER_BYTES): Socket {
  let own: Buffer | undefined;
  let waiting = false;
  const written = () => {
    if (!waiting || client.writableLength > 0) return;
    waiting = false;
    upstream.resume();
  };
  const upstream = connect({
    ...options,
    onread: {
      // Asked for once when the socket opens and again after every read: the buffer the next read lands in.
      buffer: () => own ?? (landing ??= Buffer.allocUnsafe(TUNNEL_READ_BUFFER_BYTES)),
      callback(bytes, buffer) {
        const read = buffer.subarray(0, bytes);
        client.write(buffer === own ? read : Buffer.from(read), written);
        // Nothing left queued: the kernel has copied all of it, the buffer is free again.
        if (client.writableLength === 0) {
          own ??= Buffer.allocUnsafe(bufferBytes);
          return true;
        }
        waiting = true;
        return false;
      },
    },
  });
  return upstream;
}
