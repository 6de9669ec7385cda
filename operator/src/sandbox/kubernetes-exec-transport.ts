// ToolboxTransport over pods/exec: `[...toolboxCommand, ...args]` runs in a container of the
// run's pod through the API server, over a WebSocket (channel protocol v5 when the server
// offers it, v4 otherwise). The stream handling is in exec-process.ts; this file connects,
// with a deadline. The socket is our own `ws` one, authenticated by client-node's public
// applyToHTTPSOptions: client-node's Exec creates its socket where a connect deadline cannot
// reach it, and the hook around that was private to the package. Before each exec it reads the
// pod: is it the run's, and is it the pod the operator asked for (reconcile/admitted-pod.ts)?
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import WebSocket, { type ClientOptions } from 'ws';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { podAdditions, podChangedMessage, type AdmittedImages, type SandboxPodShape } from '../reconcile/admitted-pod.ts';
import { processSecureContexts, type SecureContexts } from '../kube/secure-contexts.ts';
import { ranImageKey } from '../reconcile/init-container-runs.ts';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { ExecProcess } from './exec-process.ts';
import { SandboxError } from './sandbox-error.ts';
import type { ToolboxProcess, ToolboxTransport } from './toolbox-transport.ts';
import type { HeldSession } from './warm-sessions.ts';

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
  /**
   * What the run's pod may carry (reconcile/admitted-pod.ts sandboxPodShape). When set, every
   * exec is preceded by a read of the pod (the same read as expectedOwnerUid's), and refused
   * for good when the admitted pod carries a volume, variable, mount or container the operator
   * never puts there (a mutating webhook's service-account token), or runs another image,
   * command or security context than it was made with (`kubectl set image`): a RunFailure
   * (SandboxInvalid) that ends the run, since a pod's spec cannot lose them and no retry helps.
   */
  expectedPodShape?: SandboxPodShape;
  /**
   * The run's record of its pod's images as admitted (status.admittedPod), read where
   * expectedPodShape has none for the pod read: the record of a claimed warm pool pod is written
   * just after its agent starts, so the run the first job made the shape from may lack it.
   * A record found is kept for the pod (it is never rewritten). A miss is read again at the first
   * exec start ADMITTED_RECORD_RETRY_MS after it, not at every one: a run that never gets a
   * record (given its pod before records were kept, its create's answer lost) would otherwise
   * cost a read of the run on every exec start, while a pool pod's first exec may race its
   * record and must not be judged without it for the session's life. A read that failed is not
   * kept: the next exec start reads again. It is read again too when a pod would be refused while
   * a built init container the kubelet reports has run has no entry of what it ran in the record
   * held (ranImageKey: the reconciler writes it after it saw the run, and the shape is made once,
   * from the run the sandbox's first job read); a record that has it is kept for the pod, and a
   * miss is read again no sooner than ADMITTED_RECORD_RETRY_MS after.
   */
  readAdmittedImages?: () => Promise<AdmittedImages | undefined>;
  /** The clock a miss of readAdmittedImages is timed by (ms since the epoch); Date.now by default. */
  now?: () => number;
  /** How the pod is read for those checks; client-node's read by default. */
  readPod?: (namespace: string, name: string) => Promise<V1Pod>;
  /** Until the exec WebSocket is open (TCP, TLS, upgrade through the API server to the kubelet). */
  connectTimeoutMs?: number;
  /** WebSocket ping period: a kept session over a dead connection fails within two periods. */
  keepAliveIntervalMs?: number;
  /** After kill(), how long the close handshake may take before the socket is torn down. */
  killGraceMs?: number;
  /** Output held per stream for a slow reader before the socket is paused. */
  maxBufferedBytes?: number;
  /** The TLS contexts kept for the sockets' credentials; the process's one set by default. */
  secureContexts?: SecureContexts;
  /**
   * Sessions opened ahead into warm pool pods (warm-sessions.ts). A `serve` start takes the one
   * held for this pod, if any, and uses it only when the read of the pod before it shows the
   * run as its controller (expectedOwnerUid, required) and the uid the session was opened in.
   */
  warmSessions?: { take(namespace: string, podName: string): Promise<HeldSession | undefined> };
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_KEEP_ALIVE_INTERVAL_MS = 15_000;
export const DEFAULT_KILL_GRACE_MS = 2_000;
export const DEFAULT_MAX_BUFFERED_BYTES = 1_048_576;
/** A run read without a record for its pod is read again after this long, at the next exec start. */
export const ADMITTED_RECORD_RETRY_MS = 30_000;

/** Newest first: the API server picks the first it speaks. v5 adds closing stdin alone. */
export const EXEC_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'] as const;

/** The exec URL of a command in a container: wss://server/api/v1/namespaces/ns/pods/pod/exec?... */
export function execUrl(
  server: string,
  target: { namespace: string; podName: string; container: string },
  command: readonly string[],
): URL {
  const url = new URL(server);
  url.protocol = url.protocol === 'http:' ? 'ws:' : 'wss:';
  const base = url.pathname.replace(/\/+$/, '');
  url.pathname = `${base}/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.podName)}/exec`;
  const query = new URLSearchParams({ container: target.container, stdin: 'true', stdout: 'true', stderr: 'true', tty: 'false' });
  for (const part of command) query.append('command', part);
  url.search = query.toString();
  return url;
}

export class KubernetesExecTransport implements ToolboxTransport {
  private readonly limits: { connectTimeoutMs: number; keepAliveIntervalMs: number; killGraceMs: number; maxBufferedBytes: number };
  /**
   * The pod check (owner, shape) in flight. Starts made while it is in flight wait for it
   * rather than each reading the pod: execs opened together (before session imports, a run's
   * prepare opened its tool session and its import at once) share one read. Each exec still
   * follows a read answered after it was asked for, so the gap between the check and the exec
   * is no wider; a start made later reads again.
   */
  private podCheck: Promise<string | undefined> | undefined;
  /** The pod readAdmittedImages last answered about, the record it found for it if any, and when. */
  private admittedImages: { podUid: string | undefined; record: AdmittedImages | undefined; readAt: number } | undefined;
  /** When the run was last read for what a pod's init containers ran (withRanImagesRecord), for that pod. */
  private ranImagesRead: { podUid: string; readAt: number } | undefined;

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
    const owner = this.options.expectedOwnerUid;
    const reads = owner !== undefined || this.options.expectedPodShape !== undefined;
    // The session held for this pod (if any) and the read of the pod, side by side.
    const [taken, checked] = await Promise.allSettled([
      this.options.warmSessions && owner !== undefined && args.length === 1 && args[0] === 'serve'
        ? this.options.warmSessions.take(namespace, podName)
        : undefined,
      reads ? this.sharedPodCheck() : undefined,
    ]);
    const held = taken.status === 'fulfilled' ? taken.value : undefined;
    if (checked.status === 'rejected') {
      held?.process.kill();
      throw checked.reason;
    }
    const podUid = checked.value;
    if (held) {
      // The same pod, now the run's: the session opened in it before the claim is this run's.
      if (podUid !== undefined && podUid === held.podUid) return held.process;
      held.process.kill();
    }
    const server = kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new SandboxError('TRANSPORT', `exec into ${target} failed: the kubeconfig has no current cluster`);
    const socketOptions: ClientOptions = {};
    // CA, client certificate or token, and client-node's shared agent for this cluster.
    await kubeConfig.applyToHTTPSOptions(socketOptions);
    (this.options.secureContexts ?? processSecureContexts).apply(socketOptions);
    const url = execUrl(server, { namespace, podName, container }, [...this.options.toolboxCommand, ...args]);
    const process = new ExecProcess(this.limits);
    const socket = process.attach(new WebSocket(url, [...EXEC_PROTOCOLS], socketOptions));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.abandon();
    }, this.limits.connectTimeoutMs);
    try {
      await opened(socket as WebSocket);
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

  /** Resolves to the pod's uid once it is shown to be the run's, as the operator asked for it. */
  private sharedPodCheck(): Promise<string | undefined> {
    this.podCheck ??= this.checkPod().finally(() => {
      this.podCheck = undefined;
    });
    return this.podCheck;
  }

  private async checkPod(): Promise<string | undefined> {
    const { kubeConfig, namespace, podName, expectedOwnerUid: uid, expectedPodShape: shape } = this.options;
    const readPod =
      this.options.readPod ??
      ((ns: string, name: string) => kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name }));
    let pod: V1Pod;
    try {
      pod = await readPod(namespace, podName);
    } catch (error) {
      throw new SandboxError('TRANSPORT', `reading pod ${namespace}/${podName} before exec failed: ${describe(error)}`, { cause: error });
    }
    if (uid !== undefined && !isOwnedByRun(pod, { metadata: { uid } })) {
      throw new SandboxError(
        'TRANSPORT',
        `pod ${namespace}/${podName} is not the run's (${whyNotOwned(pod, { metadata: { uid } })}); not exec'ing into it`,
      );
    }
    let recorded = shape ? await this.withAdmittedImages(shape, pod) : undefined;
    let added = recorded ? podAdditions(pod, recorded) : [];
    // Refused with a record that lacks what an init container ran (ranImageKey): the reconciler
    // writes that entry after it saw the run, and the shape was made from a read of the run that
    // may predate it (it is made once per pooled sandbox), so read the record again before judging.
    if (shape && recorded && added.length > 0 && (await this.withRanImagesRecord(recorded, pod))) {
      recorded = await this.withAdmittedImages(shape, pod);
      added = podAdditions(pod, recorded);
    }
    if (recorded && added.length > 0) {
      throw new RunFailure(REASONS.SandboxInvalid, podChangedMessage({ namespace, name: podName }, added, recorded));
    }
    return pod.metadata?.uid;
  }

  /**
   * Whether a read of the run's record found, for a built init container the kubelet reports has
   * run, the entry of what it ran (ranImageKey) that `recorded` lacks; then it is kept for the pod.
   * Read at most once per ADMITTED_RECORD_RETRY_MS per pod (the first at once): an entry that never
   * lands (a node reporting no imageID, or a config digest) must not cost a read of the run on
   * every exec start. A read that failed is not counted.
   */
  private async withRanImagesRecord(recorded: SandboxPodShape, pod: V1Pod): Promise<boolean> {
    const uid = pod.metadata?.uid;
    const read = this.options.readAdmittedImages;
    if (!read || uid === undefined || recorded.admitted?.uid !== uid || !ranUnrecorded(pod, recorded, recorded.admitted)) return false;
    const now = this.options.now?.() ?? Date.now();
    const last = this.ranImagesRead?.podUid === uid ? this.ranImagesRead.readAt : undefined;
    if (last !== undefined && now - last < ADMITTED_RECORD_RETRY_MS) return false;
    let fresh: AdmittedImages | undefined;
    try {
      fresh = await read();
    } catch {
      // Judged with the record held, as when the run cannot be read for a missing record.
      return false;
    }
    this.ranImagesRead = { podUid: uid, readAt: now };
    if (fresh?.uid !== uid || ranUnrecorded(pod, recorded, fresh)) return false;
    this.admittedImages = { podUid: uid, record: fresh, readAt: now };
    return true;
  }

  /** The shape with the run's record of this pod's images, where it has none and the run's status has one by now. */
  private async withAdmittedImages(shape: SandboxPodShape, pod: V1Pod): Promise<SandboxPodShape> {
    const uid = pod.metadata?.uid;
    const newer = this.admittedImages?.podUid === uid ? this.admittedImages?.record : undefined;
    // A record read later than the shape's (withRanImagesRecord) is the newer of the two.
    if (newer) return { ...shape, admitted: newer };
    if (shape.admitted?.uid === uid || !this.options.readAdmittedImages) return shape;
    const now = this.options.now?.() ?? Date.now();
    const known = this.admittedImages?.podUid === uid ? this.admittedImages : undefined;
    if (!known?.record && (!known || now - known.readAt >= ADMITTED_RECORD_RETRY_MS)) {
      try {
        const read = await this.options.readAdmittedImages();
        this.admittedImages = { podUid: uid, record: read?.uid === uid ? read : undefined, readAt: now };
      } catch {
        // A run that cannot be read now is judged without the record, as a run from before it was
        // kept; nothing is remembered, so the next exec start reads again.
      }
    }
    const kept = this.admittedImages;
    const record = kept?.podUid === uid ? kept?.record : undefined;
    return record ? { ...shape, admitted: record } : shape;
  }
}

/**
 * Whether a built init container the kubelet reports has run has no entry of what it ran
 * (ranImageKey) in `record`: the reconciler writes it once it saw the run, under the operator's
 * repository only, so it may land after the record was read.
 */
function ranUnrecorded(pod: V1Pod, shape: SandboxPodShape, record: AdmittedImages): boolean {
  return (pod.status?.initContainerStatuses ?? []).some(
    (status) =>
      shape.initContainers.has(status.name) &&
      (status.state?.running !== undefined || status.state?.terminated !== undefined) &&
      !record.images.has(ranImageKey(status.name)),
  );
}

/** Resolves when the upgrade is done; rejects on a refused upgrade (its status and body) or an error. */
function opened(socket: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
    socket.once('close', (code) => reject(new Error(`the exec stream closed before it opened (${code})`)));
    // A refused upgrade (403, 404, 400 "container not found") carries the reason in its body.
    socket.once('unexpected-response', (_request, response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        if (body.length < 2_000) body += chunk;
      });
      response.on('end', () => reject(new Error(`Unexpected server response: ${response.statusCode}${reasonOf(body)}`)));
      response.on('error', reject);
    });
  });
}

/** The message of a Status body, else its start. */
function reasonOf(body: string): string {
  if (body === '') return '';
  try {
    const status = JSON.parse(body) as { message?: unknown };
    if (typeof status.message === 'string') return `: ${status.message}`;
  } catch {
    // not a Status
  }
  return `: ${body.slice(0, 200)}`;
}

function describe(error: unknown): string {
  if (error && typeof error === 'object' && 'message' in error && typeof error.message === 'string') return error.message;
  return String(error);
}
