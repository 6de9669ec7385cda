// The egress proxy's Prometheus metrics, on one injected registry. Labelled by the run's
// namespace (a tenant), never by run or host: those are unbounded, and they are in the log
// line and status.egress instead.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class EgressMetrics {
  readonly registry = new Registry();
  readonly connections: Counter<'namespace' | 'decision' | 'rule'>;
  readonly bytes: Counter<'namespace' | 'direction'>;
  readonly duration: Histogram<'namespace'>;
  readonly liveRuns: Gauge;
  readonly refusedConnections: Counter<'limit'>;

  constructor(options: { liveRuns?: () => number; defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'chamvi_egress_proxy_' });
    this.connections = new Counter({
      name: 'chamvi_egress_connections_total',
      help: 'Connections through the egress proxy by run namespace, decision (allowed, denied) and the refusing rule.',
      labelNames: ['namespace', 'decision', 'rule'],
      registers,
    });
    this.bytes = new Counter({
      name: 'chamvi_egress_bytes_total',
      help: 'Bytes through the egress proxy by run namespace and direction (sent by the sandbox, received by it).',
      labelNames: ['namespace', 'direction'],
      registers,
    });
    this.duration = new Histogram({
      name: 'chamvi_egress_connection_duration_seconds',
      help: 'How long allowed connections through the egress proxy lasted.',
      labelNames: ['namespace'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600],
      registers,
    });
    this.refusedConnections = new Counter({
      name: 'chamvi_egress_refused_connections_total',
      help: 'Client connections the egress proxy refused as they arrived, beyond its bound per source address or in all (limit).',
      labelNames: ['limit'],
      registers,
    });
    const liveRuns = options.liveRuns;
    this.liveRuns = new Gauge({
      name: 'chamvi_egress_live_runs',
      help: 'Live runs with egress the proxy currently serves.',
      registers,
      collect() {
        if (liveRuns) this.set(liveRuns());
      },
    });
  }
}
