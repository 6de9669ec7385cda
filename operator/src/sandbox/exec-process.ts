// One toolbox process inside a pod, seen through one pods/exec WebSocket: stdin frames with
// backpressure, stdout/stderr frames into streams with a bounded buffer (the socket is paused
// while a reader lags), the exit code from the status channel, a ping to notice a connection
// that died silently, and kill() as closing the stream (there is no signal over exec).
//
// The channel protocol (k8s.io/apimachinery's wsstream): every binary message starts with a
// channel byte, 0 stdin, 1 stdout, 2 stderr, 3 the Status that ends the command; with
// v5.channel.k8s.io a [255, channel] message closes that channel.
import { Readable, Writable } from 'node:stream';
import type { V1Status } from '@kubernetes/client-node';
import { execOutcome } from './exec-status.ts';
import type { ToolboxProcess } from './toolbox-transport.ts';

/** The part of a `ws` WebSocket this file uses (an interface, so tests can drive it). */
export interface ExecSocket {
  readonly protocol: string;
  readonly readyState: number;
  send(data: Buffer, callback?: (error?: Error) => void): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  ping(): void;
  pause(): void;
  resume(): void;
  on(event: 'close', listener: (code: number, reason: Buffer) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'pong', listener: () => void): unknown;
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): unknown;
}

export interface ExecProcessOptions {
  /** Output held for a slow reader, per stream, before the socket is paused. */
  maxBufferedBytes: number;
  /** Ping period; a connection that misses a pong for a whole period is dropped. 0: none. */
  keepAliveIntervalMs: number;
  /** After kill(), how long the close handshake may take before the socket is torn down. */
  killGraceMs: number;
}

const OPEN = 1;
const STDIN_CHANNEL = 0;
const STDOUT_CHANNEL = 1;
const STDERR_CHANNEL = 2;
const STATUS_CHANNEL = 3;
// v5.channel.k8s.io: a [255, channel] frame closes that channel; v4 and older cannot half-close.
const CLOSE_CHANNEL = 255;
const HALF_CLOSE_PROTOCOL = 'v5.channel.k8s.io';

type Exit = { code: number | null; signal: string | null };

export class ExecProcess implements ToolboxProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly exited: Promise<Exit>;

  private socket: ExecSocket | undefined;
  private resolveExit!: (exit: Exit) => void;
  private done = false;
  private killed = false;
  private paused = false;
  private awaitingPong = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private lastError: string | undefined;

  constructor(private readonly options: ExecProcessOptions) {
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
    const output = () => new Readable({ highWaterMark: options.maxBufferedBytes, read: () => this.resumeIfDrained() });
    this.stdout = output();
    this.stderr = output();
    this.stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => this.sendFrame(STDIN_CHANNEL, [chunk], callback),
      // Writes buffered together (corked, or made while a frame was in flight) go as one frame.
      writev: (chunks, callback) =>
        this.sendFrame(
          STDIN_CHANNEL,
          chunks.map(({ chunk }) => chunk as Buffer),
          callback,
        ),
      final: (callback) => {
        // Without v5 the only way to end stdin is to end the whole exec; callers that need no
        // EOF (`call` reads one line, `import` stops at the end-of-archive blocks) still work.
        if (this.socket?.protocol === HALF_CLOSE_PROTOCOL && this.socket.readyState === OPEN) {
          this.socket.send(Buffer.of(CLOSE_CHANNEL, STDIN_CHANNEL), (error) => callback(error ?? null));
        } else callback();
      },
    });
  }

  /** Called with the socket before its handshake, so no event is missed. */
  attach(socket: ExecSocket): ExecSocket {
    this.socket = socket;
    socket.on('message', (data) => this.receive(data));
    socket.on('error', (error) => (this.lastError = error.message));
    socket.on('pong', () => (this.awaitingPong = false));
    socket.on('close', (code) => {
      if (this.killed) this.finish({ code: null, signal: 'killed' });
      else this.finish({ code: null, signal: `exec stream closed (${code})` }, this.lastError);
    });
    return socket;
  }

  /** Called once the exec is connected. */
  connected(): void {
    if (this.options.keepAliveIntervalMs <= 0 || this.done) return;
    this.heartbeat = setInterval(() => {
      if (this.paused) return; // a paused socket reads no pongs either
      if (this.awaitingPong) {
        this.lastError = `no answer to a WebSocket ping within ${this.options.keepAliveIntervalMs} ms`;
        this.socket?.terminate();
        return;
      }
      this.awaitingPong = true;
      this.socket?.ping();
    }, this.options.keepAliveIntervalMs);
    this.heartbeat.unref();
  }

  private receive(data: Buffer): void {
    if (this.done || data.length === 0) return;
    const payload = data.subarray(1);
    switch (data[0]) {
      case STDOUT_CHANNEL:
        this.deliver(this.stdout, payload);
        return;
      case STDERR_CHANNEL:
        this.deliver(this.stderr, payload);
        return;
      case STATUS_CHANNEL:
        this.statusReceived(payload);
        return;
      default:
        // A channel-close frame, or a channel this process never opened: our streams end when
        // the command does (the Status), so neither changes anything.
        return;
    }
  }

  /** The Status on channel 3: the command ended. */
  private statusReceived(payload: Buffer): void {
    let status: V1Status;
    try {
      status = JSON.parse(payload.toString('utf8')) as V1Status;
    } catch {
      this.finish({ code: null, signal: 'exec failed' }, `the exec status was not JSON: ${payload.toString('utf8').slice(0, 200)}`);
      return;
    }
    const outcome = execOutcome(status);
    if (outcome.code !== null) this.finish({ code: outcome.code, signal: null });
    else this.finish({ code: null, signal: 'exec failed' }, outcome.failure ?? undefined);
  }

  /** Tears the socket down at once: used when connecting takes too long. */
  abandon(): void {
    this.killed = true;
    this.socket?.terminate();
  }

  kill(): void {
    if (this.done || this.killed) return;
    this.killed = true;
    // Closing the stream is all exec offers: the toolbox sees stdin end (serve stops) and
    // the API server stops relaying; a socket that does not close in time is torn down.
    this.socket?.close(1000);
    this.graceTimer = setTimeout(() => this.socket?.terminate(), this.options.killGraceMs);
    this.graceTimer.unref();
  }

  private deliver(target: Readable, chunk: Buffer): void {
    if (!target.push(chunk)) this.pause();
  }

  private sendFrame(channel: number, chunks: readonly Buffer[], callback: (error?: Error | null) => void): void {
    const socket = this.socket;
    if (!socket || socket.readyState !== OPEN || this.done) {
      callback(new Error('the exec stream is closed'));
      return;
    }
    let length = 1;
    for (const chunk of chunks) length += chunk.length;
    const frame = Buffer.allocUnsafe(length);
    frame[0] = channel;
    let at = 1;
    for (const chunk of chunks) at += chunk.copy(frame, at);
    // The callback fires once ws handed the frame to the socket: that is the backpressure.
    socket.send(frame, (error) => callback(error ?? null));
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket?.pause();
  }

  private resumeIfDrained(): void {
    if (!this.paused) return;
    if (this.stdout.readableLength >= this.options.maxBufferedBytes || this.stderr.readableLength >= this.options.maxBufferedBytes) return;
    this.paused = false;
    this.socket?.resume();
  }

  private finish(exit: Exit, note?: string): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.graceTimer);
    if (note) this.stderr.push(`${note}\n`);
    this.stdout.push(null);
    this.stderr.push(null);
    if (this.socket && this.socket.readyState === OPEN) this.socket.close(1000);
    this.resolveExit(exit);
  }
}
