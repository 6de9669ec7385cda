// ToolboxTransport over pods/exec: `[...toolboxCommand, ...args]` runs in a container of the
// run's pod through the API server, with @kubernetes/client-node's Exec (WebSocket, channel
// protocol v5 when the server offers it, v4 otherwise). The stream handling is in
// exec-process.ts; this file connects, with a deadline.
import { createRequire } from 'node:module';
import { PassThrough, Writable } from 'node:stream';
import { CoreV1Api, Exec, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
// Not re-exported by the package index in 1.4; the pinned version keeps this path stable.
import { WebSocketHandler } from '@kubernetes/client-node/dist/web-socket-handler.js';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { ExecProcess, type ExecSocket } from './exec-process.ts';
import { SandboxError } from './sandbox-error.ts';
import type { ToolboxProcess, ToolboxTransport } from './toolbox-transport.ts';

export interface KubernetesExecTransportOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  podName: string;
  container: string;
  /** How the toolbox is started in the container, e.g. ['node', '/opt/chamvi/toolbox.mjs']. */
  toolboxCommand: readonly string[];
  /**
   * The uid of the CodingRun whose pod this is. When set, every exec is preceded by a read of
   * the pod, and refused unless the run is its controller (security #11.14): a pod name is no
   * proof of whose pod it is, and one made by someone else would get the run's files and
   * answer the model's tool calls.
   */
  expectedOwnerUid?: string;
  /** Until the exec WebSocket is open (TCP, TLS, upgrade through the API server to the kubelet). */
  connectTimeoutMs?: number;
  /** WebSocket ping period: a kept session over a dead connection fails within two periods. */
  keepAliveIntervalMs?: number;
  /** After kill(), how long the close handshake may take before the socket is torn down. */
  killGraceMs?: number;
  /** Output held per stream for a slow reader before the socket is paused. */
  maxBufferedBytes?: number;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_KEEP_ALIVE_INTERVAL_MS = 15_000;
export const DEFAULT_KILL_GRACE_MS = 2_000;
export const DEFAULT_MAX_BUFFERED_BYTES = 1_048_576;

type SocketConstructor = new (uri: string, protocols: string[], options: unknown) => ExecSocket;

// client-node creates its sockets with `ws` but exposes none before the handshake ends, so a
// connect deadline could not tear a hanging one down. Its socket factory hook lets us make
// the socket ourselves, with client-node's own copy of `ws` (a dependency of it, not of ours).
const requireFromClient = createRequire(createRequire(import.meta.url).resolve('@kubernetes/client-node'));
const WebSocket = requireFromClient('ws') as SocketConstructor;

export class KubernetesExecTransport implements ToolboxTransport {
  private readonly limits: { connectTimeoutMs: number; keepAliveIntervalMs: number; killGraceMs: number; maxBufferedBytes: number };

  constructor(private readonly options: KubernetesExecTransportOptions) {
    this.limits = {
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      keepAliveIntervalMs: options.keepAliveIntervalMs ?? DEFAULT_KEEP_ALIVE_INTERVAL_MS,
      killGraceMs: options.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
      maxBufferedBytes: options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES,
    };
  }

  async start(args: string[]): Promise<ToolboxProcess> {
    const { kubeConfig, namespace, podName, container } = this.options;
    const target = `pod ${namespace}/${podName} container ${container}`;
    if (this.options.expectedOwnerUid !== undefined) await this.checkOwner(this.options.expectedOwnerUid);
    const process = new ExecProcess(this.limits);
    const handler = new WebSocketHandler(
      kubeConfig,
      (uri: string, protocols: string[], socketOptions: unknown) => process.attach(new WebSocket(uri, protocols, socketOptions)) as never,
      detachedStreams(),
    );
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.abandon();
    }, this.limits.connectTimeoutMs);
    try {
      await new Exec(kubeConfig, handler).exec(
        namespace,
        podName,
        container,
        [...this.options.toolboxCommand, ...args],
        process.stdoutSink,
        process.stderrSink,
        // Exec wants a Readable to ask for stdin; frames are sent by process.stdin instead, with
        // backpressure, so this one never yields data and never ends.
        new PassThrough(),
        false,
        (status) => process.statusReceived(status),
      );
    } catch (error) {
      process.abandon();
      if (timedOut) throw new SandboxError('TIMEOUT', `exec into ${target} did not connect within ${this.limits.connectTimeoutMs} ms`);
      throw new SandboxError('TRANSPORT', `exec into ${target} failed: ${describe(error)}`, { cause: error });
    } finally {
      clearTimeout(timer);
    }
    process.connected();
    return process;
  }

  private async checkOwner(uid: string): Promise<void> {
    const { kubeConfig, namespace, podName } = this.options;
    let pod: V1Pod;
    try {
      pod = await kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name: podName });
    } catch (error) {
      throw new SandboxError('TRANSPORT', `reading pod ${namespace}/${podName} before exec failed: ${describe(error)}`, { cause: error });
    }
    if (!isOwnedByRun(pod, { metadata: { uid } })) {
      throw new SandboxError('TRANSPORT', `pod ${namespace}/${podName} is not the run's (${whyNotOwned(pod, { metadata: { uid } })}); not exec'ing into it`);
    }
  }
}

/**
 * WebSocketHandler applies a server's "close channel" frame to these streams, and defaults
 * them to process.stdin/stdout/stderr; the operator's own stdio must never be ended by a pod.
 */
function detachedStreams(): { stdin: PassThrough; stdout: Writable; stderr: Writable } {
  const discard = () => new Writable({ write: (_chunk, _encoding, callback) => callback() });
  return { stdin: new PassThrough(), stdout: discard(), stderr: discard() };
}

function describe(error: unknown): string {
  // ws rejects with an ErrorEvent, whose message is the useful part ("Unexpected server response: 404").
  if (error && typeof error === 'object' && 'message' in error && typeof error.message === 'string') return error.message;
  return String(error);
}
