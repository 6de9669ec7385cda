// Adding connections up into a run's status.egress. Pure: the audit (egress-audit.ts) keeps a
// delta per run in memory and merges it into the status it reads back, so several proxy
// replicas and a restarted proxy add to the same counts instead of overwriting them.
import { EGRESS_HOSTS_MAX, type EgressStatus } from '../api/index.ts';

export interface ConnectionOutcome {
  host: string;
  port: number;
  allowed: boolean;
  /** The refusing rule, for a denied connection. */
  rule?: string;
  bytesSent: number;
  bytesReceived: number;
}

export const emptyEgressStatus = (): EgressStatus => ({
  connections: 0,
  allowed: 0,
  denied: 0,
  bytesSent: 0,
  bytesReceived: 0,
  hosts: [],
  hostsTruncated: false,
});

/** The status with one more connection counted. The host list stays within EGRESS_HOSTS_MAX, oldest first. */
export function addConnection(status: EgressStatus, outcome: ConnectionOutcome): EgressStatus {
  const next: EgressStatus = {
    ...status,
    connections: status.connections + 1,
    allowed: status.allowed + (outcome.allowed ? 1 : 0),
    denied: status.denied + (outcome.allowed ? 0 : 1),
    bytesSent: status.bytesSent + outcome.bytesSent,
    bytesReceived: status.bytesReceived + outcome.bytesReceived,
    hosts: status.hosts.map((entry) => ({ ...entry })),
  };
  const entry = next.hosts.find((candidate) => candidate.host === outcome.host && candidate.port === outcome.port);
  if (entry) {
    if (outcome.allowed) entry.allowed++;
    else {
      entry.denied++;
      if (outcome.rule) entry.rule = outcome.rule;
    }
  } else if (next.hosts.length < EGRESS_HOSTS_MAX) {
    next.hosts.push({
      host: outcome.host,
      port: outcome.port,
      allowed: outcome.allowed ? 1 : 0,
      denied: outcome.allowed ? 0 : 1,
      ...(!outcome.allowed && outcome.rule ? { rule: outcome.rule } : {}),
    });
  } else next.hostsTruncated = true;
  return next;
}

/** `base` plus everything counted in `delta` (a delta's host entries are added host by host). */
export function mergeEgressStatus(base: EgressStatus | undefined, delta: EgressStatus): EgressStatus {
  const start = base ?? emptyEgressStatus();
  const merged: EgressStatus = {
    connections: start.connections + delta.connections,
    allowed: start.allowed + delta.allowed,
    denied: start.denied + delta.denied,
    bytesSent: start.bytesSent + delta.bytesSent,
    bytesReceived: start.bytesReceived + delta.bytesReceived,
    hosts: start.hosts.map((entry) => ({ ...entry })),
    hostsTruncated: start.hostsTruncated || delta.hostsTruncated,
  };
  for (const entry of delta.hosts) {
    const existing = merged.hosts.find((candidate) => candidate.host === entry.host && candidate.port === entry.port);
    if (existing) {
      existing.allowed += entry.allowed;
      existing.denied += entry.denied;
      if (entry.rule) existing.rule = entry.rule;
    } else if (merged.hosts.length < EGRESS_HOSTS_MAX) merged.hosts.push({ ...entry });
    else merged.hostsTruncated = true;
  }
  return merged;
}
