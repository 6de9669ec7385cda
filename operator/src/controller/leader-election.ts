// Leader election on a coordination.k8s.io Lease, as client-go does it: one replica holds
// the lease and reconciles; the others wait and take over when it stops renewing. On a
// clean shutdown the leader releases the lease so a standby takes over at once instead of
// waiting out the lease duration. Leading is a term: run() returns when renewing failed
// for longer than the renew deadline, and may be called again to stand for election.
// Every duration is measured on this process's monotonic clock, never on the times in the
// Lease: those are the holder's wall clock, and two replicas' wall clocks may be any distance
// apart (or one may be stepped by NTP). The wall clock only stamps what the Lease shows.
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

export class LeaderElector {
  private leading = false;
  private stopped = false;
  private lease: V1Lease | undefined;
  /**
   * The attempt to take or renew the lease in flight: release() waits for it, or a renew's write
   * would make the release's a conflict, and an acquire that lands after a shutdown signal would
   * leave the lease held for its whole duration.
   */
  private attempt: Promise<boolean> | undefined;
  /** When (monotonic ms) this process began the attempt that last wrote the lease: the renew deadline counts from it. */
  private renewedAt = 0;
  /**
   * The lease as this process last saw it change, and when (monotonic ms). A lease expires
   * leaseDuration after this process saw it change, as client-go counts (observedTime), never
   * by the renewTime the holder wrote: that is the holder's wall clock. Counting by it, a
   * standby whose clock ran 13 s ahead took the lease from a leader still renewing; and a
   * rule that took a lease whose renewTime was two lease durations old at the first look let
   * a standby 31 s ahead do the same. So a standby that starts waits one lease duration from
   * its first look, whatever the renewTime says (a lease left by a replica that died).
   */
  private observed: { record: string; at: number } | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly options: LeaderElectionOptions,
    private readonly logger: ElectionLogger,
    /** Wall clock: only the acquireTime and renewTime written into the Lease, for people to read. */
    private readonly now: () => Date = () => new Date(),
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    /** Monotonic clock (ms) that every expiry and deadline is measured on; never stepped by NTP. */
    private readonly monotonic: () => number = () => performance.now(),
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /** One attempt to take or renew the lease. True when this process holds it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const { identity, leaseDurationSeconds, namespace, leaseName } = this.options;
    // Taken before the read: the renew deadline counts from before this attempt's write.
    const startedAt = this.monotonic();
    const now = this.now();
    const current = await this.store.get();
    if (!current) {
      this.lease = await this.store.create({
        metadata: { name: leaseName, namespace },
        spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      });
      this.renewedAt = startedAt;
      return true;
    }
    const spec = current.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const record = JSON.stringify([holder, spec.renewTime, spec.leaseDurationSeconds, current.metadata?.resourceVersion]);
    // Taken after the read: the holder renewed before it, so the standby's count starts no earlier than the renew.
    const seenAt = this.monotonic();
    if (this.observed?.record !== record) this.observed = { record, at: seenAt };
    const durationMs = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    const expired = this.observed.at + durationMs <= seenAt;
    if (holder !== identity && holder !== '' && !expired) {
      // Another holds it: nothing of this process's to hand back at shutdown.
      this.lease = undefined;
      return false;
    }
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
      this.renewedAt = startedAt;
      return true;
    } catch (error) {
      if (isConflict(error)) return false; // another replica got there first
      throw error;
    }
  }

  /** tryAcquireOrRenew, remembered as the attempt in flight for release(). */
  private tryOnce(): Promise<boolean> {
    this.attempt = this.tryAcquireOrRenew();
    return this.attempt;
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
        const won = await this.tryOnce();
        // Stopped while the attempt was on its way: release() hands back what it took, and this
        // process never leads (no reconciler starts beside the next leader's).
        if (this.stopped) return;
        this.leading = won;
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
        // A renew that hangs (a stalled connection) is not waited for past the deadline: a
        // standby takes the lease once it expires, and two leaders would both act.
        const renewed = await this.before(this.tryOnce(), lastRenew + renewDeadlineMs);
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
      if (this.monotonic() - lastRenew > renewDeadlineMs) break;
    }
    if (this.leading) {
      this.leading = false;
      onStoppedLeading();
    }
  }

  /** The work's answer, or undefined once the monotonic clock reaches `deadline` (ms) first. */
  private async before<T>(work: Promise<T>, deadline: number): Promise<T | undefined> {
    const answered = work.then((value) => ({ value }));
    // A renew given up on may still fail later: that is not an unhandled rejection.
    answered.catch(() => undefined);
    for (;;) {
      const left = deadline - this.monotonic();
      if (left <= 0) return undefined;
      const first = await Promise.race([answered, this.sleep(left).then(() => undefined)]);
      if (first) return first.value;
    }
  }

  /**
   * Stop renewing and hand the lease back so a standby replica can take over at once: the
   * lease this process leads with, or took with an attempt still on its way when this was called.
   */
  async release(): Promise<void> {
    this.stopped = true;
    this.leading = false;
    // A shutdown signal can come while an attempt is on its way: a renew (its write would make
    // the release's a conflict), or the acquire of a standby (it may yet take the lease, which
    // nobody would then hand back). Read the lease after it lands, waiting no longer than a renew may take.
    if (this.attempt) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.renewDeadlineSeconds * 1000)));
      await Promise.race([this.attempt.catch(() => undefined), bound]);
      clearTimeout(timer);
    }
    // Never written by this process, or since seen held by another: nothing to hand back.
    if (!this.lease) return;
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
