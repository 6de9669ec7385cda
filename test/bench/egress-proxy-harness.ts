// The egress proxy for `make bench-egress`: the production server (egress-proxy-server.ts)
// with its real decisions, credential check and audit hooks, but a fixed run instead of the
// CodingRun watch (the bench measures the data path, not the API server). Run as its own
// process so its memory is its own. Prints {"port": N} when it listens.
//
//   npx tsx test/bench/egress-proxy-harness.ts <egressKey> <runUid> <allowed pattern>
import type { AddressInfo } from 'node:net';
import { createEgressProxyServer } from '../../operator/src/egress/egress-proxy-server.ts';
import { parseHostPatterns } from '../../operator/src/egress/host-pattern.ts';

const [egressKey, runUid, pattern] = process.argv.slice(2) as [string, string, string];
const allow = parseHostPatterns([pattern]);
const run = { namespace: 'bench', name: 'bench', uid: runUid, allow };
let connections = 0;
const server = createEgressProxyServer({
  egressKey,
  policy: { allowEgress: allow, allowPrivateDestinations: allow, apiServer: [] },
  lookupRun: (uid) => (uid === runUid ? run : undefined),
  resolve: (host) => Promise.resolve(host === 'upstream.test' ? ['127.0.0.1'] : []),
  // The production audit formats a log line per connection; count instead, so the figure is the proxy's.
  record: () => void connections++,
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
// A line on stdin asks for this process's memory after a full collection (node --expose-gc).
process.stdin.on('data', () => {
  (globalThis as { gc?: () => void }).gc?.();
  const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
  console.log(JSON.stringify({ rss, heapUsed, external, arrayBuffers, connections }));
});
