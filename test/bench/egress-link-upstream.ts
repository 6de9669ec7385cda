// The upstream across the shaped link of `make bench-egress` (shaped-link.ts), run inside the
// link's network namespace. Prints {"port": N} when it listens.
//
//   npx tsx test/bench/egress-link-upstream.ts <address> <download bytes>
import type { AddressInfo } from 'node:net';
import { createBenchUpstream } from './bench-upstream.ts';

const [address, downloadBytes] = process.argv.slice(2) as [string, string];
const server = createBenchUpstream(Number(downloadBytes));
server.listen(0, address, () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
