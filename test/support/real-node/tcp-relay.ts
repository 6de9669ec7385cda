// A plain TCP relay, run as its own process by cluster-services.ts: the test control plane's
// API server listens on loopback only (a shared machine), and the address a real cluster
// publishes as the `kubernetes` Service's endpoint must be one pods reach. This puts the API
// server on the node's bridge address, byte for byte (TLS stays end to end, so the pod checks
// the API server's own certificate), much as a load balancer in front of API servers does.
//
//   node tcp-relay.ts LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
import { connect, createServer } from 'node:net';

const [listenHost, listenPort, targetHost, targetPort] = process.argv.slice(2);
if (!listenHost || !listenPort || !targetHost || !targetPort) {
  console.error('usage: tcp-relay.ts LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT');
  process.exit(2);
}

const server = createServer((client) => {
  const upstream = connect(Number(targetPort), targetHost);
  client.pipe(upstream).pipe(client);
  // Either side going away ends the other; errors are normal ends here, not the relay's.
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
});
server.listen(Number(listenPort), listenHost, () => console.log(`relaying ${listenHost}:${listenPort} -> ${targetHost}:${targetPort}`));
