// Security #11.8: finds out, per namespace, whether NetworkPolicy is enforced there, so that
// decide() can refuse runs where a sandbox's policy would isolate nothing. A probe:
//   1. starts a throwaway pod that is a sandbox to the network (reconcile/isolation-probe-pod.ts);
//   2. control: from it, connects to the target (by default this operator's HTTP port), which
//      must work while no policy applies, or the probe proves nothing;
//   3. puts a deny-all NetworkPolicy on the pod and keeps connecting for settleSeconds: a
//      connection that now fails (twice in a row) means enforced; one that still works means not;
//   4. deletes pod and policy, whatever happened.
// Every connection attempt is bracketed by two reads of the probe pod that must show the pod
// the probe created, unchanged (reconcile/isolation-probe-pod-identity.ts): the pod is reached
// by name, and a pod put under that name, or an image patched into it, could answer "blocked".
// One that is not the probe's makes the verdict unknown, never enforced.
// Connections go through the same exec path a run's tools take (the toolbox's bash tool), so
// the probe connects from wherever a sandbox's commands run. On the kwok dev cluster that is
// this machine, where no policy applies: the probe correctly finds isolation NOT enforced.
// Verdicts are cached per namespace: kept for maxAgeSeconds, refreshed in the background after
// half of that while runs keep asking; until a probe has decided, the namespace is unknown,
// and unknown is not enforced (runs wait). A namespace no run asked about for maxAgeSeconds is
// forgotten (its verdict expired by then anyway): namespaces made per pull request would otherwise
// each keep an entry for the whole leadership term. The clock, the sleep and both I/O ports are injected.
// Once stopped (shutdown, or the lease lost), a probe under way creates nothing and sweeps no
// leftovers: the sweep lists every probe object in the namespace, the new leader's included, so
// every such write passes a WriteGate that stop() closes. Only the probe's own objects, by the
// random names no other probe uses, are still deleted.
import { randomBytes } from 'node:crypto';
import { CoreV1Api, NetworkingV1Api, type KubeConfig, type V1NetworkPolicy, type V1Pod } from '@kubernetes/client-node';
import { ISOLATION_PROBE_TARGET, type OperatorConfig } from '../config/operator-config.ts';
import type { IsolationView } from '../reconcile/isolation.ts';
import {
  ISOLATION_PROBE_LABEL,
  buildIsolationProbePod,
  buildIsolationProbePolicy,
  isolationProbeName,
} from '../reconcile/isolation-probe-pod.ts';
import {
  probePodIdentity,
  whyNotProbePod,
  withStartedContainers,
  type ProbePodIdentity,
} from '../reconcile/isolation-probe-pod-identity.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../reconcile/ownership.ts';
import { SANDBOX_CONTAINER } from '../reconcile/sandbox-pod.ts';
import { createKubernetesSandbox } from '../sandbox/kubernetes-sandbox.ts';
import { isNotFound, unlessNotFound } from '../kube/api-errors.ts';
import { WriteGate } from './write-gate.ts';

/** The API calls a probe makes: on its own pod and policy only, in the namespace it probes. */
export interface IsolationProbeKube {
  createPod(pod: V1Pod): Promise<V1Pod>;
  readPod(namespace: string, name: string): Promise<V1Pod | undefined>;
  deletePod(namespace: string, name: string): Promise<void>;
  createNetworkPolicy(policy: V1NetworkPolicy): Promise<void>;
  deleteNetworkPolicy(namespace: string, name: string): Promise<void>;
  /** Names of probe pods and policies left in the namespace (by LEFTOVER_SELECTOR), e.g. by a killed operator. */
  listLeftovers(namespace: string): Promise<{ pods: string[]; policies: string[] }>;
}

/** One TCP connection attempt from inside the probe pod. */
export interface IsolationProbeConnector {
  /** True when a connection to `target` (host:port) was made; false when refused or timed out. Throws when the pod could not be asked. */
  connect(namespace: string, podName: string, target: string): Promise<boolean>;
}

export interface IsolationProbeLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface IsolationProbeOptions {
  kube: IsolationProbeKube;
  connector: IsolationProbeConnector;
  config: Pick<OperatorConfig, 'sandboxImage' | 'sandboxNodePath' | 'sandboxPlacement' | 'isolationProbe'>;
  /** host:port the probe pod connects to, reachable from any pod while no policy applies (read when a probe runs: the port may be known late). */
  target: () => string;
  logger: IsolationProbeLogger;
  /** Told when a namespace's verdict changed, so the runs waiting there are looked at again. */
  onVerdict?: (namespace: string) => void;
  now?: () => Date;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** A new probe's id (part of its object names); random by default. */
  newProbeId?: () => string;
}

/** A probe that could not decide is tried again after this long, not on every reconcile. */
export const UNDECIDED_RETRY_MS = 30_000;
/** Pause between connection attempts, and between looks at the probe pod. */
const ATTEMPT_INTERVAL_MS = 1_000;
/** How often observe() looks for namespaces to forget: a sweep costs a walk over all of them. */
const FORGET_SWEEP_MS = 60_000;
/** Consecutive failed connections under the policy that count as enforced (one could be a blip). */
const FAILURES_FOR_ENFORCED = 2;
/** Control attempts before concluding the target is unreachable even without a policy. */
const CONTROL_ATTEMPTS = 3;

interface Entry {
  view: IsolationView;
  /** When the verdict was reached (ms since the epoch). */
  at: number;
  /** When a run last asked (observe) or the verdict was reached: an entry not asked for maxAgeSeconds is forgotten. */
  askedAt: number;
}

class ProbeUndecided extends Error {
  override readonly name: string = 'ProbeUndecided';
}

/** The pod under the probe pod's name is not the one the probe created: nothing it answers counts, and nothing is retried. */
class ProbePodNotOurs extends ProbeUndecided {
  override readonly name = 'ProbePodNotOurs';
  constructor(namespace: string, name: string, why: string) {
    super(
      `probe pod ${namespace}/${name} is not the pod the probe created (${why}), so its answers prove nothing; ` +
        'someone who may delete, create or patch pods in this namespace changed it: keep that to admins. The probe tries again',
    );
  }
}

/** The probe pod by name and what every read of it must show. */
interface OwnProbePod {
  namespace: string;
  name: string;
  identity: ProbePodIdentity;
}

const defaultSleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

export class IsolationProbe {
  private readonly verdicts = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private readonly gate = new WriteGate();
  private readonly now: () => Date;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly newProbeId: () => string;
  private onVerdict: ((namespace: string) => void) | undefined;
  /** When observe() last looked for namespaces to forget. */
  private sweptAt = 0;

  constructor(private readonly options: IsolationProbeOptions) {
    this.now = options.now ?? (() => new Date());
    this.sleep = options.sleep ?? defaultSleep;
    this.newProbeId = options.newProbeId ?? (() => randomBytes(5).toString('hex'));
    this.onVerdict = options.onVerdict;
  }

  /** Who to tell when a verdict is reached (the controller wakes the runs waiting in that namespace). */
  setOnVerdict(onVerdict: (namespace: string) => void): void {
    this.onVerdict = onVerdict;
  }

  /**
   * What is known of the namespace now, without waiting. Starts a probe when there is no
   * verdict, when it is too old, or (in the background, keeping the verdict) when it is half way there.
   */
  observe(namespace: string): IsolationView {
    const now = this.now().getTime();
    const maxAgeMs = this.options.config.isolationProbe.maxAgeSeconds * 1000;
    this.forgetUnasked(now, maxAgeMs);
    const entry = this.verdicts.get(namespace);
    if (entry) entry.askedAt = now;
    const age = entry ? now - entry.at : Infinity;
    const decided = entry !== undefined && entry.view.verdict !== 'unknown';
    const refreshAfter = decided ? maxAgeMs / 2 : Math.min(UNDECIDED_RETRY_MS, maxAgeMs);
    if (age >= refreshAfter) this.start(namespace);
    if (decided && age < maxAgeMs) return entry.view;
    if (entry && !decided) return entry.view;
    return { verdict: 'unknown', detail: 'a probe pod is checking' };
  }

  /** How many namespaces a verdict is kept for (bounded by those asked about within maxAgeSeconds). */
  get namespacesKept(): number {
    return this.verdicts.size;
  }

  /**
   * Drops the namespaces no run asked about for maxAgeSeconds and none is probing. Their verdict
   * is expired (reached no later than that ask): a run that comes later starts a probe, as it
   * would have anyway, and is woken by its verdict.
   */
  private forgetUnasked(now: number, maxAgeMs: number): void {
    if (now - this.sweptAt < FORGET_SWEEP_MS) return;
    this.sweptAt = now;
    for (const [namespace, entry] of this.verdicts)
      if (now - entry.askedAt >= maxAgeMs && !this.inFlight.has(namespace)) this.verdicts.delete(namespace);
  }

  /** Resolves when the namespace's current probe (if any) has finished; for tests and shutdown. */
  async settled(namespace: string): Promise<void> {
    await this.inFlight.get(namespace);
  }

  /** Stops probing; a probe under way makes no other write, ends at its next step and still deletes what it created. */
  async stop(): Promise<void> {
    this.gate.close();
    this.abort.abort();
    await Promise.all([...this.inFlight.values()]);
  }

  private start(namespace: string): void {
    if (this.inFlight.has(namespace) || this.abort.signal.aborted) return;
    const probing = this.probe(namespace)
      .then((view) => {
        if (this.abort.signal.aborted) return;
        const previous = this.verdicts.get(namespace)?.view;
        const at = this.now().getTime();
        this.verdicts.set(namespace, { view, at, askedAt: at });
        const log =
          view.verdict === 'enforced'
            ? this.options.logger.info.bind(this.options.logger)
            : this.options.logger.warn.bind(this.options.logger);
        log({ namespace, verdict: view.verdict, detail: view.detail, target: this.options.target() }, 'isolation probed');
        if (previous?.verdict !== view.verdict || previous?.detail !== view.detail) this.onVerdict?.(namespace);
      })
      .finally(() => this.inFlight.delete(namespace));
    this.inFlight.set(namespace, probing);
  }

  /** One probe, start to end; never throws: what could not be decided is 'unknown' with the reason. */
  private async probe(namespace: string): Promise<IsolationView> {
    const { kube } = this.options;
    const { timeoutSeconds } = this.options.config.isolationProbe;
    const deadline = this.now().getTime() + timeoutSeconds * 1000;
    const probeId = this.newProbeId();
    const name = isolationProbeName(probeId);
    let podCreated = false;
    let policyCreated = false;
    try {
      await this.removeLeftovers(namespace);
      this.gate.check();
      const pod = await kube.createPod(buildIsolationProbePod(namespace, probeId, this.options.config, timeoutSeconds + 60));
      podCreated = true;
      const own = await this.waitUntilReady({ namespace, name, identity: probePodIdentity(pod) }, deadline);

      // The control: without a policy the target must be reachable, or a failure below proves nothing.
      if (!(await this.controlConnects(own, deadline))) {
        return {
          verdict: 'unknown',
          detail:
            `the probe could not reach ${this.options.target()} from namespace ${namespace} even without a policy, so it cannot tell; ` +
            'set isolationProbe.target to an address every pod reaches',
        };
      }
      this.gate.check();
      await kube.createNetworkPolicy(buildIsolationProbePolicy(namespace, probeId, own.identity.uid));
      policyCreated = true;
      const settleUntil = this.now().getTime() + this.options.config.isolationProbe.settleSeconds * 1000;
      let failures = 0;
      for (;;) {
        const connected = await this.connectOnce(own, deadline);
        failures = connected ? 0 : failures + 1;
        if (failures >= FAILURES_FOR_ENFORCED) return { verdict: 'enforced' };
        if (connected && this.now().getTime() >= settleUntil) {
          return {
            verdict: 'unenforced',
            detail: `a probe pod under a deny-all NetworkPolicy still reached ${this.options.target()} after ${this.options.config.isolationProbe.settleSeconds}s`,
          };
        }
        await this.pause();
      }
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      if (error instanceof ProbePodNotOurs) this.options.logger.warn({ namespace, name, why }, 'isolation probe pod replaced or changed');
      return { verdict: 'unknown', detail: `the last probe could not decide: ${why.slice(0, 512)}` };
    } finally {
      // Best effort, even after stop(): no other probe uses these names. The pod also ends itself
      // (activeDeadlineSeconds) and takes the policy with it.
      if (policyCreated)
        await kube.deleteNetworkPolicy(namespace, name).catch((error: unknown) => this.cleanupFailed(namespace, name, error));
      if (podCreated) await kube.deletePod(namespace, name).catch((error: unknown) => this.cleanupFailed(namespace, name, error));
    }
  }

  private async removeLeftovers(namespace: string): Promise<void> {
    const { kube } = this.options;
    const leftovers = await kube.listLeftovers(namespace);
    for (const policy of leftovers.policies) {
      this.gate.check();
      await kube.deleteNetworkPolicy(namespace, policy);
    }
    for (const pod of leftovers.pods) {
      this.gate.check();
      await kube.deletePod(namespace, pod);
    }
  }

  /** Resolves to the pod with the containers it runs once ready: from then on those must not be replaced either. */
  private async waitUntilReady(own: OwnProbePod, deadline: number): Promise<OwnProbePod> {
    const { namespace, name } = own;
    // Polled, not watched: a probe is rare (once per namespace per maxAgeSeconds) and short.
    for (;;) {
      this.checkTime(deadline, `probe pod ${namespace}/${name} was not ready`);
      let pod: V1Pod | undefined;
      try {
        pod = await this.options.kube.readPod(namespace, name);
      } catch {
        // A read that failed (a 5xx, a 429, a timeout) shows nothing: read again until the deadline.
        await this.pause();
        continue;
      }
      if (!pod) throw new ProbeUndecided(`probe pod ${namespace}/${name} disappeared`);
      const why = whyNotProbePod(pod, own.identity);
      if (why !== undefined) throw new ProbePodNotOurs(namespace, name, why);
      const phase = pod.status?.phase;
      if (phase === 'Failed' || phase === 'Succeeded')
        throw new ProbeUndecided(`probe pod ${namespace}/${name} ended (${pod.status?.reason ?? phase})`);
      if (pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True')) {
        return { ...own, identity: withStartedContainers(own.identity, pod) };
      }
      await this.pause();
    }
  }

  private async controlConnects(own: OwnProbePod, deadline: number): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      if (await this.connectOnce(own, deadline)) return true;
      if (attempt >= CONTROL_ATTEMPTS) return false;
      await this.pause();
    }
  }

  /**
   * One connection attempt; an exec that fails (the pod's exec not ready yet, a dropped stream) is
   * tried again until the deadline. The exec goes by name, so the pod is read before and after it:
   * when both reads show the probe's own pod (a uid is never reused, a restarted container is
   * seen), the exec between them went into it. A read that shows another pod ends the probe
   * undecided; a read that failed (a 5xx, a 429, a timeout) shows nothing, and the attempt is
   * made again like a failed exec, its answer unused.
   */
  private async connectOnce(own: OwnProbePod, deadline: number): Promise<boolean> {
    for (;;) {
      this.checkTime(deadline, 'no connection attempt could be made from the probe pod');
      let connected: boolean | undefined;
      let failure: unknown;
      try {
        await this.confirmOwnPod(own);
        const answer = await this.options.connector.connect(own.namespace, own.name, this.options.target());
        await this.confirmOwnPod(own);
        connected = answer;
      } catch (error) {
        if (error instanceof ProbePodNotOurs) throw error;
        failure = error;
      }
      if (connected !== undefined) return connected;
      if (this.now().getTime() >= deadline) throw failure;
      await this.pause();
    }
  }

  private async confirmOwnPod(own: OwnProbePod): Promise<void> {
    const why = whyNotProbePod(await this.options.kube.readPod(own.namespace, own.name), own.identity);
    if (why !== undefined) throw new ProbePodNotOurs(own.namespace, own.name, why);
  }

  private checkTime(deadline: number, what: string): void {
    if (this.abort.signal.aborted) throw new ProbeUndecided('the operator stopped probing');
    if (this.now().getTime() >= deadline) {
      throw new ProbeUndecided(`${what} within isolationProbe.timeoutSeconds (${this.options.config.isolationProbe.timeoutSeconds}s)`);
    }
  }

  private pause(): Promise<void> {
    return this.sleep(ATTEMPT_INTERVAL_MS, this.abort.signal);
  }

  private cleanupFailed(namespace: string, name: string, error: unknown): void {
    this.options.logger.warn(
      { namespace, name, err: error instanceof Error ? error.message : String(error) },
      'could not delete an isolation probe object',
    );
  }
}

/** The default target: this operator pod (the chart gives it POD_IP) on its HTTP port; 127.0.0.1 outside a pod, as on the dev cluster. */
export function defaultIsolationProbeTarget(podIp: string | undefined, port: number): string {
  const host = podIp && podIp.length > 0 ? podIp : '127.0.0.1';
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * What marks a probe's leftovers: the probe label and the operator's. Anyone may put the probe
 * label on a pod or policy of their own; the operator may not delete such an object (the chart's
 * write policy refuses it), and a sweep that tried would fail every probe in the namespace.
 */
const LEFTOVER_SELECTOR = `${ISOLATION_PROBE_LABEL},${MANAGED_BY_LABEL}=${MANAGED_BY}`;

/** The probe's API calls through client-node. */
export function createIsolationProbeKube(kubeConfig: KubeConfig): IsolationProbeKube {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  const ignoreNotFound = (error: unknown) => {
    if (!isNotFound(error)) throw error;
  };
  return {
    createPod: (pod) => core.createNamespacedPod({ namespace: pod.metadata!.namespace!, body: pod }),
    readPod: (namespace, name) => unlessNotFound(core.readNamespacedPod({ namespace, name })),
    deletePod: (namespace, name) =>
      core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).then(() => undefined, ignoreNotFound),
    createNetworkPolicy: (policy) =>
      networking.createNamespacedNetworkPolicy({ namespace: policy.metadata!.namespace!, body: policy }).then(() => undefined),
    deleteNetworkPolicy: (namespace, name) =>
      networking.deleteNamespacedNetworkPolicy({ namespace, name }).then(() => undefined, ignoreNotFound),
    async listLeftovers(namespace) {
      const [pods, policies] = await Promise.all([
        core.listNamespacedPod({ namespace, labelSelector: LEFTOVER_SELECTOR }),
        networking.listNamespacedNetworkPolicy({ namespace, labelSelector: LEFTOVER_SELECTOR }),
      ]);
      const names = (list: { items: Array<{ metadata?: { name?: string } }> }) => list.items.map((item) => item.metadata!.name!);
      return { pods: names(pods), policies: names(policies) };
    },
  };
}

/** How long one connection attempt may take: a dropped SYN (what most enforcing CNIs do) ends here. */
const CONNECT_TIMEOUT_MS = 3_000;

/**
 * Connects through the sandbox's own exec path: the toolbox in the probe pod, its bash tool,
 * and bash's /dev/tcp (no extra binary needed in the image). The target was checked against
 * ISOLATION_PROBE_TARGET (host:port, no shell characters) when the config was loaded.
 */
export function createExecConnector(kubeConfig: KubeConfig, toolboxCommand: readonly string[]): IsolationProbeConnector {
  return {
    async connect(namespace, podName, target) {
      // It becomes part of a shell command: only host:port, whatever its source (config or POD_IP).
      if (!ISOLATION_PROBE_TARGET.test(target)) throw new Error(`isolation probe target ${JSON.stringify(target)} is not host:port`);
      const separator = target.lastIndexOf(':');
      const host = target.slice(0, separator).replace(/^\[(.*)\]$/, '$1');
      const port = target.slice(separator + 1);
      const sandbox = createKubernetesSandbox({
        kubeConfig,
        namespace,
        podName,
        container: SANDBOX_CONTAINER,
        toolboxCommand,
        mode: 'call',
      });
      try {
        const response = await sandbox.call(
          { tool: 'bash', input: { command: `: 3<>/dev/tcp/${host}/${port}`, timeoutMs: CONNECT_TIMEOUT_MS } },
          { timeoutMs: CONNECT_TIMEOUT_MS + 30_000 },
        );
        if (!response.ok) throw new Error(`the toolbox refused the connection attempt: ${JSON.stringify(response.error).slice(0, 300)}`);
        const result = response.result as { exitCode: number | null; timedOut: boolean };
        return result.exitCode === 0 && !result.timedOut;
      } finally {
        await sandbox.close();
      }
    },
  };
}
