// The launcher helper's side of its children's output (process-launcher-main.ts): each chunk a
// child writes to stdout or stderr is sent over the IPC channel to the operator, with flow
// control. A send the channel cannot write at once is queued in the helper, outside any V8
// heap limit and inside the pod's memory, until the operator reads it; a child that writes
// faster than the operator parses (a `git ls-tree` of gigabytes of paths) grew the helper
// without limit and got the container OOM-killed. So the helper counts what it has sent and the
// channel has not yet written, and past maxHeldBytes pauses every child's output (a paused
// stream stops reading its pipe, and the child then blocks in write) until the channel has
// caught up. The channel is one for all the children, so all of them wait for it.
import type { Readable } from 'node:stream';
import type { FromLauncher } from './process-launcher.ts';

/** Sends a message over the channel and calls `sent` once it is written (or failed): node's process.send with a callback. */
export type SendWithCallback = (message: FromLauncher, sent: () => void) => void;

/**
 * 1 MiB: a few of the 64 KiB chunks a pipe reads at once, enough to keep the channel busy
 * while the operator reads the last of them, and nothing beside the pod's memory limit.
 */
export const MAX_HELD_BYTES = 1024 * 1024;

export class OutputRelay {
  private held = 0;
  private mostHeld = 0;
  private paused = false;
  private readonly streams = new Set<Readable>();

  constructor(
    private readonly send: SendWithCallback,
    private readonly maxHeldBytes: number = MAX_HELD_BYTES,
  ) {}

  /** Output bytes sent and not yet written by the channel. */
  get heldBytes(): number {
    return this.held;
  }

  /** The most heldBytes has been (for tests and diagnostics). */
  get mostHeldBytes(): number {
    return this.mostHeld;
  }

  /** Whether the children's output is paused, waiting for the channel. */
  get waiting(): boolean {
    return this.paused;
  }

  /** Relays `stream` (child `id`'s stdout or stderr) until it ends. */
  relay(id: number, type: 'stdout' | 'stderr', stream: Readable): void {
    this.streams.add(stream);
    stream.once('close', () => this.streams.delete(stream));
    stream.on('data', (data: Buffer) => this.forward({ type, id, data }));
    // After the listener: adding a 'data' listener starts a stream that was not paused itself.
    if (this.paused) stream.pause();
  }

  private forward(message: Extract<FromLauncher, { type: 'stdout' | 'stderr' }>): void {
    const bytes = message.data.byteLength;
    this.held += bytes;
    this.mostHeld = Math.max(this.mostHeld, this.held);
    if (!this.paused && this.held > this.maxHeldBytes) {
      this.paused = true;
      for (const stream of this.streams) stream.pause();
    }
    this.send(message, () => {
      this.held -= bytes;
      // Half way down: the channel has room for a few chunks before the next pause.
      if (this.paused && this.held <= this.maxHeldBytes / 2) {
        this.paused = false;
        for (const stream of this.streams) stream.resume();
      }
    });
  }
}
