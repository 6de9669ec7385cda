// The upstream across the shaped link of `make bench-egress` (shaped-link.ts), run inside the
// link's network namespace: the bench's upstream over TLS, as a registry across a network is
// reached, serving the certificate the bench made (bench-certificate.ts). Prints {"port": N}
// when it listens.
//
//   npx tsx test/bench/egress-link-upstream.ts <address> <download bytes> <cert file> <key file>
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createBenchTlsUpstream } from './bench-upstream.ts';

const [address, downloadBytes, certFile, keyFile] = process.argv.slice(2) as [string, string, string, string];
const server = createBenchTlsUpstream(Number(downloadBytes), { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') });
server.listen(0, address, () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
