// The floor of `make bench-egress`: the least a relay in a second process can do, node:net
// pipe() both ways with no checks, no HTTP and no audit, so the benchmark can tell the cost
// of a second process copying the bytes on this machine from the cost of the proxy itself.
// Same loader and stdin protocol as egress-proxy-harness.ts. Prints {"port": N} when it listens.
//
//   npx tsx test/bench/tcp-relay-harness.ts <upstream port>
import { connect, createServer, type AddressInfo } from 'node:net';
import { answerStatsRequests } from './relay-process-stats.ts';

const upstreamPort = Number(process.argv[2]);
const server = createServer((client) => {
  const upstream = connect(upstreamPort, '127.0.0.1');
  client.pipe(upstream);
  upstream.pipe(client);
  client.on('error', () => undefined);
  upstream.on('error', () => undefined);
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
answerStatsRequests(() => 0);
