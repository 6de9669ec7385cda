// One TLS context per distinct set of TLS credentials, for the exec WebSockets. Node builds a
// new SecureContext for every connection whose options carry PEM (ca, cert, key): it parses
// the CA, the client certificate and the key each time, about 1.3 ms of CPU here for a
// 2048-bit RSA key, paid again by every exec: a run's tool session (one or two a run, more
// after a worker restart), every call in `call` mode, the isolation probe's calls. Under 1%
// of a run's operator CPU in `serve` mode, more in `call` mode. A context built once from the
// same bytes is the same context, so the socket's TLS is unchanged: the same CA verifies the
// server, the same certificate is sent. API requests and watches need none of this: they go
// through one kept dispatcher or agent (connection-reuse.ts).
import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls';

/** The TLS options applyToHTTPSOptions may set; the context is built from exactly these. */
export type TlsCredentialOptions = Pick<SecureContextOptions, 'ca' | 'cert' | 'key' | 'pfx' | 'passphrase'> & {
  secureContext?: SecureContext;
};

/** Rotated credentials add one context each; a handful covers any process's life. */
const MAX_KEPT = 8;

/** PEM as given: one text, or an array's texts kept apart. */
type Pem = string | Pem[];

/**
 * The PEM's text, an array as an array of its parts' (Node sets each key of an array, but reads
 * only the first of one string, so `[A, B]` and `"A\nB"` are not the same credential), or
 * undefined for anything but strings and Buffers (a KeyObject).
 */
function pemOf(value: unknown): Pem | undefined {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('latin1');
  if (!Array.isArray(value)) return undefined;
  const parts = value.map((part: unknown) => pemOf(part));
  return parts.some((part) => part === undefined) ? undefined : (parts as Pem[]);
}

export class SecureContexts {
  private readonly kept = new Map<string, SecureContext>();

  constructor(private readonly create: (options: TlsCredentialOptions) => SecureContext = (options) => createSecureContext(options)) {}

  /**
   * Sets `options.secureContext` to the one kept for its ca, cert, key and passphrase, built
   * on first use. tls.connect takes a given secureContext in place of the PEM, so the PEM
   * stays where it is. A PKCS#12 bundle (pfx) or a KeyObject is left to Node: kubeconfigs
   * carry PEM.
   */
  apply(options: TlsCredentialOptions): void {
    if (options.pfx !== undefined || options.secureContext !== undefined) return;
    if (options.ca === undefined && options.cert === undefined && options.key === undefined) return;
    const parts = [pemOf(options.ca), pemOf(options.cert), pemOf(options.key), options.passphrase ?? ''];
    if (parts.includes(undefined)) return;
    // The bytes themselves are the key: two credentials never share a context.
    const key = JSON.stringify(parts);
    let context = this.kept.get(key);
    if (context === undefined) {
      context = this.create({ ca: options.ca, cert: options.cert, key: options.key, passphrase: options.passphrase });
      if (this.kept.size >= MAX_KEPT) this.kept.delete(this.kept.keys().next().value!);
      this.kept.set(key, context);
    }
    options.secureContext = context;
  }

  get size(): number {
    return this.kept.size;
  }
}

/** The process's one set: every exec transport of a process shares it. */
export const processSecureContexts = new SecureContexts();
