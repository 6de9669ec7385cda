// The audit of every connection through the proxy: a JSON log line and metrics at once, and
// per run, in batches, counts and the distinct hosts in status.egress plus an Event on the
// first refusal of each host. The status is written as a delta added to what is there
// (egress-tally.ts), so proxy replicas and restarts add up instead of overwriting.
import type { EgressStatus } from '../api/index.ts';
import type { RunEvent } from '../reconcile/decision.ts';
import type { EgressRun } from './decide-connection.ts';
import type { EgressConnection } from './egress-proxy-server.ts';
import type { EgressMetrics } from './egress-metrics.ts';
import { addConnection, emptyEgressStatus, mergeEgressStatus } from './egress-tally.ts';

export interface EgressAuditLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface EgressAuditDependencies {
  logger: EgressAuditLogger;
  metrics: EgressMetrics;
  /** Add `delta` to the run's status.egress (read, add, write with the resourceVersion). */
  addToStatus(run: EgressRun, delta: EgressStatus): Promise<void>;
  recordEvent(run: EgressRun, event: RunEvent): Promise<void>;
  /** How often pending deltas are written. */
  flushIntervalMs?: number;
}

/** Hosts per run whose first refusal was already told in an Event (beyond it, the status and log still count). */
const EVENTED_HOSTS_MAX = 64;

interface Pending {
  run: EgressRun;
  delta: EgressStatus;
}

export class EgressAudit {
  private readonly pending = new Map<string, Pending>();
  private readonly evented = new Map<string, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly deps: EgressAuditDependencies) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.deps.flushIntervalMs ?? 2_000);
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
    const entry = this.pending.get(run.uid) ?? { run, delta: emptyEgressStatus() };
    entry.delta = addConnection(entry.delta, {
      host: connection.host,
      port: connection.port,
      allowed: connection.allowed,
      ...(connection.rule ? { rule: connection.rule } : {}),
      bytesSent: connection.bytesSent,
      bytesReceived: connection.bytesReceived,
    });
    this.pending.set(run.uid, entry);
    if (!connection.allowed) this.firstDenial(run, connection);
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
   * hosts it was told about. Its Events are already sent (recordEvent is not awaited) and its
   * pending counts stay, written at the next flush: they are of connections it made while it
   * lived, and the status writer drops them if the run is gone.
   */
  forget(uid: string): void {
    this.evented.delete(uid);
  }

  /** How many runs' told hosts are kept (for tests and the log). */
  get runsRemembered(): number {
    return this.evented.size;
  }

  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const batch = [...this.pending.values()];
      this.pending.clear();
      for (const { run, delta } of batch) {
        try {
          await this.deps.addToStatus(run, delta);
        } catch (error) {
          this.deps.logger.warn(
            { namespace: run.namespace, run: run.name, err: String(error) },
            'could not write status.egress; counts kept for the next try',
          );
          const later = this.pending.get(run.uid);
          // Keep the counts: add what came in meanwhile on top of the delta that failed.
          this.pending.set(run.uid, { run, delta: later ? mergeEgressStatus(delta, later.delta) : delta });
        }
      }
    });
    return this.flushing;
  }
}
