// The admin kubeconfig every component and test client uses. Certificates are embedded so
// the file stays valid when copied, and it is a plain file so tests may add contexts.
import { readFileSync, writeFileSync } from 'node:fs';
import { stringify } from 'yaml';

export interface KubeconfigOptions {
  server: string;
  caCert: string;
  clientCert: string;
  clientKey: string;
}

const b64 = (path: string) => readFileSync(path).toString('base64');

export function writeKubeconfig(path: string, options: KubeconfigOptions): void {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'chamvi-local', cluster: { server: options.server, 'certificate-authority-data': b64(options.caCert) } }],
    users: [
      {
        name: 'chamvi-admin',
        user: {
          'client-certificate-data': b64(options.clientCert),
          'client-key-data': b64(options.clientKey),
        },
      },
    ],
    contexts: [{ name: 'chamvi-local', context: { cluster: 'chamvi-local', user: 'chamvi-admin' } }],
    'current-context': 'chamvi-local',
    preferences: {},
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
}
