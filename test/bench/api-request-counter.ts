// Counts the API server's requests by kind, from its own /metrics (apiserver_request_total),
// so a benchmark can take the difference over a phase. The metric has no client label, so
// requests are told apart by what they touch (group, resource, subresource, verb) and a
// benchmark attributes them to the component that makes that kind of request.
import { request, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** `VERB group/resource[/subresource]`, e.g. `POST /pods`, `PUT chamvi.dev/codingruns/status`. */
export type RequestKind = string;
export type RequestCounts = Map<RequestKind, number>;

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const match of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[match[1]!] = match[2]!;
  return labels;
}

export function parseRequestTotals(metrics: string): RequestCounts {
  const counts: RequestCounts = new Map();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const close = line.lastIndexOf('}');
    const labels = parseLabels(line.slice('apiserver_request_total{'.length, close));
    // Non-resource requests (/metrics, /healthz, /openapi) are the benchmark's and the
    // components' plumbing, not work on objects.
    if (!labels.resource) continue;
    const path = [labels.group ?? '', labels.resource, ...(labels.subresource ? [labels.subresource] : [])].join('/');
    const kind = `${labels.verb} ${path}`;
    counts.set(kind, (counts.get(kind) ?? 0) + Number(line.slice(close + 1).trim()));
  }
  return counts;
}

export function difference(after: RequestCounts, before: RequestCounts): RequestCounts {
  const delta: RequestCounts = new Map();
  for (const [kind, count] of after) {
    const change = count - (before.get(kind) ?? 0);
    if (change > 0) delta.set(kind, change);
  }
  return delta;
}

export async function scrapeRequestTotals(kubeConfig: KubeConfig): Promise<RequestCounts> {
  const server = new URL(kubeConfig.getCurrentCluster()!.server);
  const options: RequestOptions = { hostname: server.hostname, port: server.port, path: '/metrics', method: 'GET' };
  await kubeConfig.applyToHTTPSOptions(options);
  const body = await new Promise<string>((resolve, reject) => {
    const req = request(options, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        response.statusCode === 200 ? resolve(text) : reject(new Error(`GET /metrics: ${response.statusCode} ${text.slice(0, 200)}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
  return parseRequestTotals(body);
}

/** Splits a delta by component: the first rule whose pattern matches a kind takes it. */
export function attribute(
  delta: RequestCounts,
  rules: ReadonlyArray<readonly [component: string, pattern: RegExp]>,
): Record<string, { total: number; kinds: Record<RequestKind, number> }> {
  const result: Record<string, { total: number; kinds: Record<RequestKind, number> }> = {};
  for (const [kind, count] of [...delta].sort(([a], [b]) => a.localeCompare(b))) {
    const component = rules.find(([, pattern]) => pattern.test(kind))?.[0] ?? 'other';
    const entry = (result[component] ??= { total: 0, kinds: {} });
    entry.total += count;
    entry.kinds[kind] = count;
  }
  return result;
}

/** The kind the garbage collector's reads of runs are moved to (moveGarbageCollectorReads). */
export const GARBAGE_COLLECTOR_RUN_READS = "GET chamvi.dev/codingruns, the garbage collector's";

/**
 * How many reads of one CodingRun kube-controller-manager's garbage collector made, from the
 * API server's audit log (JSON lines; the control plane logs every such read). It reads the
 * runs that own the objects it tracks (in a 200-run benchmark: 209 reads, about one a run,
 * seconds after the run's pod was made or deleted), and the counter cannot tell those reads
 * from the operator's.
 */
export function garbageCollectorRunReads(auditLines: string): number {
  let reads = 0;
  for (const line of auditLines.split('\n')) {
    if (!line.includes('generic-garbage-collector')) continue;
    const event = JSON.parse(line) as { verb?: string; userAgent?: string; objectRef?: { apiGroup?: string; resource?: string } };
    const isRunRead = event.verb === 'get' && event.objectRef?.apiGroup === 'chamvi.dev' && event.objectRef.resource === 'codingruns';
    if (isRunRead && event.userAgent?.endsWith('/generic-garbage-collector')) reads += 1;
  }
  return reads;
}

/**
 * Moves up to `count` requests of one kind to another (a client's own row, where the counter
 * cannot tell two clients' requests of that kind apart); never more than the kind has.
 */
export function moveRequests(delta: RequestCounts, from: RequestKind, to: RequestKind, count: number): RequestCounts {
  const had = delta.get(from) ?? 0;
  const moved = Math.min(had, count);
  if (moved <= 0) return delta;
  const adjusted = new Map(delta);
  adjusted.set(to, moved);
  if (had === moved) adjusted.delete(from);
  else adjusted.set(from, had - moved);
  return adjusted;
}

/** Moves `reads` of the runs' GETs to the garbage collector's own kind (GARBAGE_COLLECTOR_RUN_READS). */
export const moveGarbageCollectorReads = (delta: RequestCounts, reads: number): RequestCounts =>
  moveRequests(delta, 'GET chamvi.dev/codingruns', GARBAGE_COLLECTOR_RUN_READS, reads);
