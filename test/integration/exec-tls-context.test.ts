// The exec WebSockets' TLS contexts are kept per credential (operator/src/kube/secure-contexts.ts):
// a real HTTPS server that asks for a client certificate takes the exec upgrades of real
// KubernetesExecTransports and records the certificate each connection presented. Two execs
// with one kubeconfig build one context and both present its certificate; another client
// certificate gets its own context and is the one presented; and a kubeconfig whose CA does
// not sign the server's certificate fails to connect, though its client certificate is one
// already kept: the CA is part of what the kept context is chosen by.
import { once } from 'node:events';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createSecureContext, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { SecureContexts, type TlsCredentialOptions } from '../../operator/src/kube/secure-contexts.ts';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { createPki, type Pki } from '../support/control-plane/certificates.ts';
import { writeKubeconfig } from '../support/control-plane/kubeconfig.ts';

let dir: string;
let pki: Pki;
/** A second CA with its own admin certificate: another credential, and a CA that did not sign the server. */
let other: Pki;
let server: Server;
let sockets: WebSocketServer;
/** The SHA-256 fingerprint of the client certificate each exec connection presented. */
const presented: string[] = [];

const fingerprint = (certFile: string) => new X509Certificate(readFileSync(certFile)).fingerprint256;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chamvi-exec-tls-'));
  pki = createPki(join(dir, 'one'), '127.0.0.1');
  other = createPki(join(dir, 'other'), '127.0.0.1');
  server = createServer({
    key: readFileSync(pki.apiServerKey),
    cert: readFileSync(pki.apiServerCert),
    // Client certificates of either CA; the server's own is signed by the first alone.
    ca: [readFileSync(pki.caCert), readFileSync(other.caCert)],
    requestCert: true,
    rejectUnauthorized: true,
  });
  sockets = new WebSocketServer({ server, handleProtocols: (protocols) => [...protocols][0] ?? false });
  sockets.on('connection', (socket, request) => {
    presented.push((request.socket as TLSSocket).getPeerCertificate().fingerprint256);
    socket.close(1000);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
});

afterAll(async () => {
  sockets?.close();
  server?.closeAllConnections();
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function kubeConfigWith(name: string, caCert: string, clientCert: string, clientKey: string): KubeConfig {
  const path = join(dir, `${name}.kubeconfig`);
  writeKubeconfig(path, { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caCert, clientCert, clientKey });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(path);
  return kubeConfig;
}

/** One exec through a transport: open, then wait for the server's close. */
async function exec(kubeConfig: KubeConfig, secureContexts: SecureContexts): Promise<void> {
  const transport = new KubernetesExecTransport({
    kubeConfig,
    namespace: 'ns',
    podName: 'pod',
    container: 'sandbox',
    toolboxCommand: ['toolbox'],
    secureContexts,
    connectTimeoutMs: 10_000,
  });
  const process = await transport.start(['serve']);
  await process.exited;
}

describe('the exec WebSockets keep one TLS context per credential', () => {
  let built = 0;
  const secureContexts = new SecureContexts((options: TlsCredentialOptions) => {
    built += 1;
    return createSecureContext(options);
  });

  it('two execs with one kubeconfig build one context and present its certificate', async () => {
    const admin = kubeConfigWith('admin', pki.caCert, pki.adminCert, pki.adminKey);
    const before = presented.length;
    await exec(admin, secureContexts);
    await exec(admin, secureContexts);
    expect(built).toBe(1);
    expect(presented.slice(before)).toEqual([fingerprint(pki.adminCert), fingerprint(pki.adminCert)]);
  });

  it('another client certificate gets its own context, and is the one presented', async () => {
    const second = kubeConfigWith('second', pki.caCert, other.adminCert, other.adminKey);
    const before = presented.length;
    await exec(second, secureContexts);
    expect(built).toBe(2);
    expect(presented.slice(before)).toEqual([fingerprint(other.adminCert)]);
  });

  it("a CA that did not sign the server's certificate fails, though the client certificate is kept", async () => {
    const wrongCa = kubeConfigWith('wrong-ca', other.caCert, pki.adminCert, pki.adminKey);
    const before = presented.length;
    await expect(exec(wrongCa, secureContexts)).rejects.toThrow(/certificate|self.signed|unable to verify/i);
    expect(built).toBe(3);
    expect(presented.length).toBe(before);
  });
});
