// The audit of every connection through the proxy: a JSON log line and metrics at once, and
// per run, in batches, counts and the distinct hosts in status.egress plus an Event on the
// first refusal of each host. The status is written as a delta added to what is there
// (egress-tally.ts), so proxy replicas and restarts add up instead of overwriting. Counts the
// API server refuses for good are dropped at once, others after FLUSH_TRIES failed flushes or
// a last try once the run is forgotten: the log line above keeps every connection either way.
import type { EgressStatus } from '../api/index.ts';
import type { RunEvent } from '../reconcile/decision.ts';
import type { EgressRun } from './decide-connection.ts';
import type { EgressConnection } from './egress-proxy-server.ts';
import type { EgressMetrics } from './egress-metrics.ts';
import { EgressStatusRefusedError } from './egress-status-refused-error.ts';
import { addConnection, emptyEgressStatus, mergeEgressStatus } from './egress-tally.ts';

export interface EgressAuditLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface EgressAuditDependencies {
  logger: EgressAuditLogger;
  metrics: EgressMetrics;
  /**
   * Add `delta` to the run's status.egress (read, add, write with the resourceVersion). An
   * EgressStatusRefusedError means it can never be written; any other error, that it may later.
   */
  addToStatus(run: EgressRun, delta: EgressStatus): Promise<void>;
  recordEvent(run: EgressRun, event: RunEvent): Promise<void>;
  /** How often pending deltas are written. */
  flushIntervalMs?: number;
}

/** Hosts per run whose first refusal was already told in an Event (beyond it, the status and log still count). */
const EVENTED_HOSTS_MAX = 64;

/**
 * Flushes a run's counts may fail (5xx, the network) before they are dropped: a minute at the
 * default 2 s, long enough for an API server's restart. Unbounded, a run the API server kept
 * failing cost a GET of the whole run, a PATCH and a warning at every flush for as long as the
 * proxy lived.
 */
export const FLUSH_TRIES = 30;

interface Pending {
  run: EgressRun;
  delta: EgressStatus;
  /** Flushes that failed to write this delta (or the older part of it). */
  failures: number;
  /** The run is forgotten: if this write fails, the counts are dropped. */
  lastTry: boolean;
}

export class EgressAudit {
  private readonly pending = new Map<string, Pending>();
  /**
   * Runs whose status the API server refused for good (EgressStatusRefusedError), until the proxy
   * forgets them: their counts are no longer kept. A run that went on connecting started a new
   * delta each time, and each flush read the whole run again, sent its PATCH and warned.
   */
  private readonly refused = new Set<string>();
  private readonly evented = new Map<string, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  /** The flush under way, with any asked for behind it (stop()); undefined when none runs. */
  private flushing: Promise<void> | undefined;
  /** The entry being written, out of `pending` meanwhile (flushes write one at a time). */
  private writing: Pending | undefined;

  constructor(private readonly deps: EgressAuditDependencies) {}

  start(): void {
    // A tick that comes while a flush still runs (a slow API server, many runs) is skipped: queued,
    // ticks came faster than flushes ended, and each queued flush added another round of writes.
    this.timer = setInterval(() => {
      if (!this.flushing) void this.flush();
    }, this.deps.flushIntervalMs ?? 2_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }

  record(connection: EgressConnection): void {
    const { run } = connection;
    const namespace = run?.namespace ?? '';
    const decision = connection.allowed ? 'allowed' : 'denied';
    this.deps.logger.info(
      {
        event: 'egress',
        kind: connection.kind,
        namespace: run?.namespace,
        run: run?.name,
        runUid: run?.uid,
        host: connection.host,
        port: connection.port,
        decision,
        ...(connection.rule ? { rule: connection.rule } : {}),
        bytesSent: connection.bytesSent,
        bytesReceived: connection.bytesReceived,
        durationMs: Math.round(connection.durationMs),
      },
      connection.allowed ? 'egress allowed' : `egress denied: ${connection.message ?? connection.rule}`,
    );
    const { metrics } = this.deps;
    metrics.connections.inc({ namespace, decision, rule: connection.rule ?? '' });
    if (connection.allowed) {
      metrics.bytes.inc({ namespace, direction: 'sent' }, connection.bytesSent);
      metrics.bytes.inc({ namespace, direction: 'received' }, connection.bytesReceived);
      metrics.duration.observe({ namespace }, connection.durationMs / 1000);
    }
    // A refusal before the run is known (no or a bad credential) belongs to no run's status.
    if (!run) return;
    if (!connection.allowed) this.firstDenial(run, connection);
    if (this.refused.has(run.uid)) return;
    const entry = this.pending.get(run.uid) ?? { run, delta: emptyEgressStatus(), failures: 0, lastTry: false };
    entry.delta = addConnection(entry.delta, {
      host: connection.host,
      port: connection.port,
      allowed: connection.allowed,
      ...(connection.rule ? { rule: connection.rule } : {}),
      bytesSent: connection.bytesSent,
      bytesReceived: connection.bytesReceived,
    });
    this.pending.set(run.uid, entry);
  }

  private firstDenial(run: EgressRun, connection: EgressConnection): void {
    const hosts = this.evented.get(run.uid) ?? new Set<string>();
    this.evented.set(run.uid, hosts);
    const key = `${connection.host}:${connection.port}`;
    if (hosts.has(key) || hosts.size >= EVENTED_HOSTS_MAX) return;
    hosts.add(key);
    void this.deps.recordEvent(run, {
      type: 'Warning',
      reason: 'EgressDenied',
      message: `The egress proxy refused ${key} (rule ${connection.rule}): ${connection.message ?? ''}`.slice(0, 1024),
    });
  }

  /**
   * Forget a run the proxy no longer serves (it ended or is gone; egress-run-watch.ts): the
   * hosts it was told about. Its Events are already sent (recordEvent is not awaited). Its
   * pending counts, of connections it made while it lived, get one last try at the next flush
   * (the status writer drops them if the run is gone) and are dropped if that fails, so a run
   * that ended is not written at every flush for the rest of the proxy's life.
   */
  forget(uid: string): void {
    this.evented.delete(uid);
    this.refused.delete(uid);
    const pending = this.pending.get(uid);
    if (pending) pending.lastTry = true;
    if (this.writing?.run.uid === uid) this.writing.lastTry = true;
  }

  /** How many runs' told hosts are kept (for tests and the log). */
  get runsRemembered(): number {
    return this.evented.size;
  }

  /** How many runs have counts waiting to be written (for tests and the log). */
  get runsPending(): number {
    return this.pending.size;
  }

  /** Write every run's pending counts; after the flush under way, if one is. */
  flush(): Promise<void> {
    const flushing = (this.flushing ?? Promise.resolve()).then(() => this.writePending());
    this.flushing = flushing;
    const done = () => {
      if (this.flushing === flushing) this.flushing = undefined;
    };
    flushing.then(done, done);
    return flushing;
  }

  private async writePending(): Promise<void> {
    // Counts that never failed go first: runs whose writes keep failing wait behind the others,
    // not the others behind them. Each is taken out as it is written, so forget() finds it.
    const uids = [...this.pending.values()].sort((a, b) => a.failures - b.failures).map((entry) => entry.run.uid);
    for (const uid of uids) {
      const entry = this.pending.get(uid);
      if (!entry) continue;
      this.pending.delete(uid);
      this.writing = entry;
      try {
        await this.write(entry);
      } finally {
        this.writing = undefined;
      }
    }
  }

  private async write(entry: Pending): Promise<void> {
    const { run, delta } = entry;
    try {
      await this.deps.addToStatus(run, delta);
      return;
    } catch (error) {
      const where = { namespace: run.namespace, run: run.name, runUid: run.uid, err: String(error) };
      if (EgressStatusRefusedError.isInstance(error)) {
        this.deps.logger.warn(where, 'status.egress refused for good; its counts are no longer kept (the egress log lines keep them)');
        this.refused.add(run.uid);
        this.pending.delete(run.uid);
        return;
      }
      const failures = entry.failures + 1;
      if (entry.lastTry || failures >= FLUSH_TRIES) {
        const why = entry.lastTry ? 'at its last try (the run is no longer served)' : `after ${failures} flushes`;
        this.deps.logger.warn(where, `could not write status.egress ${why}; these counts dropped (the egress log lines keep them)`);
        return;
      }
      // One warning when a run's writes start failing, not one at every flush.
      if (failures === 1) this.deps.logger.warn(where, 'could not write status.egress; counts kept for the next tries');
      // Keep the counts: add what came in meanwhile on top of the delta that failed. They keep
      // the failed delta's tries, so a run with steady traffic is not retried without end.
      const later = this.pending.get(run.uid);
      this.pending.set(run.uid, {
        run,
        delta: later ? mergeEgressStatus(delta, later.delta) : delta,
        failures,
        lastTry: later?.lastTry ?? false,
      });
    }
  }
}
