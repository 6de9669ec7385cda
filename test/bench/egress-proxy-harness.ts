// The egress proxy for `make bench-egress`: the production server (egress-proxy-server.ts)
// with its real decisions, credential check and audit hooks, but a fixed run instead of the
// CodingRun watch (the bench measures the data path, not the API server). Run as its own
// process so its memory and CPU time are its own. Prints {"port": N} when it listens; answers
// `memory` and `cpu` on stdin (relay-process-stats.ts).
//
//   npx tsx test/bench/egress-proxy-harness.ts <egressKey> <runUid> <hosts> [egress directory]
//
// <hosts> lists the upstreams the run may reach and what each name resolves to, comma-separated
// `name:port=address` (the loopback upstream, and the one across the shaped link if there is one).
//
// The optional egress directory is another version's operator/src/egress (the benchmark's
// EGRESS_BENCH_BASELINE, extracted whole from that ref): its egress-proxy-server.ts runs, with
// that version's host patterns, so a change to the data path can be measured against the code
// before it in the same run.
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as productionServer from '../../operator/src/egress/egress-proxy-server.ts';
import * as productionPatterns from '../../operator/src/egress/host-pattern.ts';
import { answerStatsRequests } from './relay-process-stats.ts';

const [egressKey, runUid, hosts, egressDirectory] = process.argv.slice(2) as [string, string, string, string | undefined];
const load = async <T>(file: string, production: T): Promise<T> =>
  egressDirectory ? ((await import(pathToFileURL(path.join(egressDirectory, file)).href)) as T) : production;
const { createEgressProxyServer } = await load('egress-proxy-server.ts', productionServer);
const { parseHostPatterns } = await load('host-pattern.ts', productionPatterns);
const upstreams = hosts.split(',').map((entry) => entry.split('=') as [string, string]);
const addressOf = new Map(upstreams.map(([hostPort, address]) => [hostPort.slice(0, hostPort.lastIndexOf(':')), address]));
const allow = parseHostPatterns(upstreams.map(([hostPort]) => hostPort));
const run = { namespace: 'bench', name: 'bench', uid: runUid, allow };
let connections = 0;
const server = createEgressProxyServer({
  egressKey,
  policy: { allowEgress: allow, allowPrivateDestinations: allow, apiServer: [] },
  lookupRun: (uid) => (uid === runUid ? run : undefined),
  resolve: (host) => Promise.resolve(addressOf.has(host) ? [addressOf.get(host)!] : []),
  // The production audit formats a log line per connection; count instead, so the figure is the proxy's.
  record: () => void connections++,
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
answerStatsRequests(() => connections);
