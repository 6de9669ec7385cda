// A ToolboxTransport that times the one it wraps, for the exec benchmark's breakdown. The
// product's sandbox takes its transport as a dependency (ToolboxSandbox), so the benchmark
// runs the product's own call path with this around the real pods/exec transport and adds
// nothing to the product: when start() resolved (the exec WebSocket is open: TCP, TLS and the
// upgrade through the API server to the kubelet) and when each stdout chunk arrived.
import { Transform } from 'node:stream';
import type { ToolboxProcess, ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';

export interface TransportMarks {
  /** start() called. */
  startedAt?: number;
  /** start() resolved: the stream is open. */
  connectedAt?: number;
  /** Arrival times of stdout chunks since the last reset(). */
  chunks: number[];
}

export class TimedTransport implements ToolboxTransport {
  marks: TransportMarks = { chunks: [] };

  constructor(
    private readonly inner: ToolboxTransport,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Forget the marks, before a call that is to be measured on its own. */
  reset(): void {
    this.marks = { chunks: [] };
  }

  async start(args: string[]): Promise<ToolboxProcess> {
    this.marks.startedAt = this.clock();
    const process = await this.inner.start(args);
    this.marks.connectedAt = this.clock();
    // Chunks pass through unchanged and in the same tick; only their arrival is noted.
    const stdout = new Transform({
      transform: (chunk: Buffer, _encoding, callback) => {
        this.marks.chunks.push(this.clock());
        callback(null, chunk);
      },
    });
    process.stdout.pipe(stdout);
    return { stdin: process.stdin, stdout, stderr: process.stderr, exited: process.exited, kill: () => process.kill() };
  }

  /** The first stdout chunk at or after `since` (a serve session's stdout carries every call's answer). */
  firstChunkSince(since: number): number | undefined {
    return this.marks.chunks.find((at) => at >= since);
  }
}
