// The control plane's PKI, made with the openssl CLI: one CA that signs the API server's
// serving cert, the admin client cert (group system:masters, so it bypasses RBAC), and
// kwok's kubelet serving cert; plus the service-account signing key pair.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiServerCert: string;
  apiServerKey: string;
  adminCert: string;
  adminKey: string;
  kubeletCert: string;
  kubeletKey: string;
  serviceAccountKey: string;
  serviceAccountPublicKey: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function signedCert(dir: string, name: string, subject: string, extensions: string): void {
  openssl(['genrsa', '-out', `${name}.key`, '2048'], dir);
  openssl(['req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`], dir);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '3650',
      '-sha256',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    ],
    dir,
  );
}

/** Writes a fresh PKI into `dir` (created if missing). */
export function createPki(dir: string, serviceIp: string): Pki {
  mkdirSync(dir, { recursive: true });
  openssl(['genrsa', '-out', 'ca.key', '2048'], dir);
  openssl(['req', '-x509', '-new', '-key', 'ca.key', '-subj', '/CN=chamvi-local-ca', '-days', '3650', '-sha256', '-out', 'ca.crt'], dir);
  const serverSans = [
    'IP:127.0.0.1',
    `IP:${serviceIp}`,
    'DNS:localhost',
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:kubernetes.default.svc.cluster.local',
  ].join(',');
  signedCert(
    dir,
    'apiserver',
    '/CN=kube-apiserver',
    `keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=${serverSans}\n`,
  );
  signedCert(
    dir,
    'admin',
    '/O=system:masters/CN=chamvi-admin',
    'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth,serverAuth\n' +
      'subjectAltName=IP:127.0.0.1,DNS:localhost\n',
  );
  signedCert(
    dir,
    'kubelet',
    '/CN=kwok-kubelet',
    'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' + 'subjectAltName=IP:127.0.0.1,DNS:localhost\n',
  );
  openssl(['genrsa', '-out', 'sa.key', '2048'], dir);
  openssl(['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
  return {
    dir,
    caCert: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    apiServerCert: join(dir, 'apiserver.crt'),
    apiServerKey: join(dir, 'apiserver.key'),
    adminCert: join(dir, 'admin.crt'),
    adminKey: join(dir, 'admin.key'),
    kubeletCert: join(dir, 'kubelet.crt'),
    kubeletKey: join(dir, 'kubelet.key'),
    serviceAccountKey: join(dir, 'sa.key'),
    serviceAccountPublicKey: join(dir, 'sa.pub'),
  };
}
