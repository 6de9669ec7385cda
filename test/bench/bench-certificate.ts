// A self-signed serving certificate for `make bench-egress`, made at the bench's start with the
// openssl CLI (a system package of the Makefile; node:crypto makes keys but no certificates).
// The bench's clients trust it as their only CA and ask for one of its names by SNI, so the TLS
// they speak is what a sandbox's https speaks, certificate check included. An ECDSA P-256 key,
// as the registries and forges a sandbox reaches mostly serve.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface BenchCertificate {
  /** PEM texts, for a server or a client in this process. */
  cert: string;
  key: string;
  /** The same as files, for a server in another process. */
  certFile: string;
  keyFile: string;
  remove(): void;
}

/** A certificate for `names` (DNS names; the first is also its subject), valid for a day. */
export function createBenchCertificate(names: readonly string[]): BenchCertificate {
  const directory = mkdtempSync(path.join(tmpdir(), 'chamvi-bench-certificate-'));
  const certFile = path.join(directory, 'server.crt');
  const keyFile = path.join(directory, 'server.key');
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '1',
        '-subj',
        `/CN=${names[0]}`,
        '-addext',
        `subjectAltName=${names.map((name) => `DNS:${name}`).join(',')}`,
        '-keyout',
        keyFile,
        '-out',
        certFile,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
  } catch (error) {
    rmSync(directory, { recursive: true, force: true });
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`making the bench's TLS certificate with openssl failed: ${stderr || (error as Error).message}`);
  }
  return {
    cert: readFileSync(certFile, 'utf8'),
    key: readFileSync(keyFile, 'utf8'),
    certFile,
    keyFile,
    remove: () => rmSync(directory, { recursive: true, force: true }),
  };
}
