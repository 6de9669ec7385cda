// The operator's API calls share TLS connections (operator/src/kube/connection-reuse.ts):
// a real HTTPS server counts the connections a real client-node KubeConfig opens for a series
// of calls. Without the reuse (the control case) client-node opens one per call.
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reuseConnections } from '../../operator/src/kube/connection-reuse.ts';
import { createPki, type Pki } from '../support/control-plane/certificates.ts';
import { writeKubeconfig } from '../support/control-plane/kubeconfig.ts';

let dir: string;
let pki: Pki;
let server: Server;
let connections = 0;
let kubeconfigPath: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chamvi-connection-reuse-'));
  pki = createPki(dir, '127.0.0.1');
  server = createServer(
    { key: readFileSync(pki.apiServerKey), cert: readFileSync(pki.apiServerCert), ca: readFileSync(pki.caCert), requestCert: true },
    (request, response) => {
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default', uid: 'u' } }));
      request.resume();
    },
  );
  server.on('secureConnection', () => {
    connections += 1;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  kubeconfigPath = join(dir, 'kubeconfig');
  writeKubeconfig(kubeconfigPath, {
    server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    caCert: pki.caCert,
    clientCert: pki.adminCert,
    clientKey: pki.adminKey,
  });
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

async function connectionsForCalls(kubeConfig: KubeConfig, calls: number): Promise<number> {
  kubeConfig.loadFromFile(kubeconfigPath);
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const before = connections;
  for (let index = 0; index < calls; index += 1) {
    const pod = await api.readNamespacedPod({ namespace: 'default', name: 'p' });
    expect(pod.metadata?.uid).toBe('u');
  }
  return connections - before;
}

describe('reuseConnections', () => {
  // undici itself opens a second connection for the second request and then keeps to it
  // (seen with a bare undici Agent and fetch too), so ten calls take two connections.
  it('sends a series of API calls over the same TLS connection', async () => {
    expect(await connectionsForCalls(reuseConnections(new KubeConfig()), 10)).toBeLessThanOrEqual(2);
  });

  it('control: client-node alone opens a connection per call', async () => {
    expect(await connectionsForCalls(new KubeConfig(), 10)).toBe(10);
  });
});
