// Leader election on a coordination.k8s.io Lease, as client-go does it: one replica holds
// the lease and reconciles; the others wait and take over when it stops renewing. On a
// clean shutdown the leader releases the lease so a standby takes over at once instead of
// waiting out the lease duration. Leading is a term: run() returns when renewing failed
// for longer than the renew deadline, and may be called again to stand for election.
import { CustomObjectsApi, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { isConflict, isNotFound } from '../kube/api-errors.ts';

export interface LeaderElectionOptions {
  namespace: string;
  leaseName: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
}

export interface LeaseStore {
  get(): Promise<V1Lease | undefined>;
  create(lease: V1Lease): Promise<V1Lease>;
  replace(lease: V1Lease): Promise<V1Lease>;
}

export interface ElectionLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

// client-node serialises Date fields as milliseconds, but a Lease's MicroTime must have
// exactly six fractional digits or the API server answers 400. So the Lease is read and
// written as plain JSON through the generic API, with the times formatted here.
const microTime = (time: Date | string | undefined) =>
  time === undefined ? undefined : new Date(time).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

function toWire(lease: V1Lease): object {
  const spec = lease.spec ?? {};
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: lease.metadata,
    spec: { ...spec, acquireTime: microTime(spec.acquireTime), renewTime: microTime(spec.renewTime) },
  };
}

export function kubernetesLeaseStore(kubeConfig: KubeConfig, namespace: string, name: string): LeaseStore {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const path = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace };
  return {
    async get() {
      try {
        return (await api.getNamespacedCustomObject({ ...path, name })) as V1Lease;
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    create: async (lease) => (await api.createNamespacedCustomObject({ ...path, body: toWire(lease) })) as V1Lease,
    replace: async (lease) => (await api.replaceNamespacedCustomObject({ ...path, name, body: toWire(lease) })) as V1Lease,
  };
}

const toMs = (time: Date | string | undefined) => (time === undefined ? 0 : new Date(time).getTime());

export class LeaderElector {
  private leading = false;
  private stopped = false;
  private lease: V1Lease | undefined;
  /** The renew in flight: release() waits for it, or its write would make the release's a conflict. */
  private renewing: Promise<boolean> | undefined;
  /** The renewTime this process last wrote (ms): what a standby counts the lease from, not when the answer came. */
  private renewedAt = 0;
  /**
   * The other holder's lease as this process last saw it change, and when by its own clock. A
   * lease expires leaseDuration after this process saw it renewed, as client-go counts, not
   * after the renewTime the holder wrote: that is the holder's clock, and a standby whose
   * clock ran 13 s ahead of it took the lease from a leader still renewing. (A renewTime two
   * lease durations old counts too: see tryAcquireOrRenew.)
   */
  private observed: { record: string; at: number } | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly options: LeaderElectionOptions,
    private readonly logger: ElectionLogger,
    private readonly now: () => Date = () => new Date(),
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /** One attempt to take or renew the lease. True when this process holds it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const { identity, leaseDurationSeconds, namespace, leaseName } = this.options;
    const now = this.now();
    const current = await this.store.get();
    if (!current) {
      this.lease = await this.store.create({
        metadata: { name: leaseName, namespace },
        spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      });
      this.renewedAt = now.getTime();
      return true;
    }
    const spec = current.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const record = JSON.stringify([holder, spec.renewTime, spec.leaseDurationSeconds, current.metadata?.resourceVersion]);
    if (this.observed?.record !== record) this.observed = { record, at: now.getTime() };
    const durationMs = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    // Or, by the holder's renewTime, two lease durations old: a lease left by a replica that died
    // long ago is taken at the first look (a restarted operator has a new identity), with clocks
    // up to one lease duration apart still safe.
    const expired = this.observed.at + durationMs <= now.getTime() || toMs(spec.renewTime) + 2 * durationMs <= now.getTime();
    if (holder !== identity && holder !== '' && !expired) return false;
    const takingOver = holder !== identity;
    const next: V1Lease = {
      ...current,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds,
        renewTime: now,
        ...(takingOver ? { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 } : {}),
      },
    };
    try {
      this.lease = await this.store.replace(next);
      this.renewedAt = now.getTime();
      return true;
    } catch (error) {
      if (isConflict(error)) return false; // another replica got there first
      throw error;
    }
  }

  /**
   * Blocks until this process leads, calls onStartedLeading, then keeps renewing. Returns
   * (after onStoppedLeading) when renewing failed for longer than the renew deadline, or
   * once release() was called.
   */
  async run(onStartedLeading: () => Promise<void>, onStoppedLeading: () => void): Promise<void> {
    const retryMs = this.options.retryPeriodSeconds * 1000;
    let standingBy = false;
    while (!this.stopped && !this.leading) {
      try {
        this.leading = await this.tryAcquireOrRenew();
        // Said once, so an admin (and a test) can tell a standby that is waiting from one still starting.
        if (!this.leading && !standingBy)
          this.logger.info({ identity: this.options.identity, lease: this.options.leaseName }, 'standing by');
        standingBy = !this.leading;
      } catch (error) {
        this.logger.warn({ err: String(error) }, 'could not read or take the leader lease');
      }
      if (!this.leading) await this.sleep(retryMs);
    }
    if (this.stopped) return;
    this.logger.info({ identity: this.options.identity, lease: this.options.leaseName }, 'became leader');
    const renewDeadlineMs = this.options.renewDeadlineSeconds * 1000;
    let lastRenew = this.renewedAt;
    // Renewing goes on while the leader starts: filling its caches may outlast the lease.
    void onStartedLeading().catch((error: unknown) => this.logger.warn({ err: String(error) }, 'could not start leading'));
    while (!this.stopped) {
      await this.sleep(retryMs);
      if (this.stopped) break;
      try {
        this.renewing = this.tryAcquireOrRenew();
        // A renew that hangs (a stalled connection) is not waited for past the deadline: a
        // standby takes the lease once it expires, and two leaders would both act.
        const renewed = await this.before(this.renewing, lastRenew + renewDeadlineMs);
        if (renewed === true) {
          lastRenew = this.renewedAt;
          continue;
        }
        if (renewed === undefined) {
          this.logger.warn(
            { renewDeadlineSeconds: this.options.renewDeadlineSeconds },
            'renewing the leader lease outlasted the renew deadline',
          );
          break;
        }
        this.logger.warn({}, 'another replica holds the leader lease');
      } catch (error) {
        this.logger.warn({ err: String(error) }, 'could not renew the leader lease');
      }
      if (this.now().getTime() - lastRenew > renewDeadlineMs) break;
    }
    if (this.leading) {
      this.leading = false;
      onStoppedLeading();
    }
  }

  /** The work's answer, or undefined once the clock reaches `deadline` (ms) first. */
  private async before<T>(work: Promise<T>, deadline: number): Promise<T | undefined> {
    const answered = work.then((value) => ({ value }));
    // A renew given up on may still fail later: that is not an unhandled rejection.
    answered.catch(() => undefined);
    for (;;) {
      const left = deadline - this.now().getTime();
      if (left <= 0) return undefined;
      const first = await Promise.race([answered, this.sleep(left).then(() => undefined)]);
      if (first) return first.value;
    }
  }

  /** Stop renewing and hand the lease back so a standby replica can take over at once. */
  async release(): Promise<void> {
    this.stopped = true;
    if (!this.leading || !this.lease) return;
    this.leading = false;
    // A shutdown signal can come while a renew is on its way: read the lease after it lands
    // (its write would make the release's a conflict), waiting no longer than a renew may take.
    if (this.renewing) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.renewDeadlineSeconds * 1000)));
      await Promise.race([this.renewing.catch(() => undefined), bound]);
      clearTimeout(timer);
    }
    try {
      const current = (await this.store.get()) ?? this.lease;
      if (current.spec?.holderIdentity !== this.options.identity) return;
      await this.store.replace({
        ...current,
        spec: { ...current.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: this.now() },
      });
      this.logger.info({}, 'released the leader lease');
    } catch (error) {
      this.logger.warn({ err: String(error) }, 'could not release the leader lease; a standby takes over when it expires');
    }
  }
}
