// Which TLS options share a kept context (operator/src/kube/secure-contexts.ts). The contexts
// here are stand-ins: what a context does on a real connection is
// test/integration/exec-tls-context.test.ts.
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import type { SecureContext } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { SecureContexts, type TlsCredentialOptions } from '../../operator/src/kube/secure-contexts.ts';

function counted(): { contexts: SecureContexts; built: TlsCredentialOptions[] } {
  const built: TlsCredentialOptions[] = [];
  const contexts = new SecureContexts((options) => {
    built.push(options);
    return { context: built.length } as unknown as SecureContext;
  });
  return { contexts, built };
}

describe('SecureContexts', () => {
  it('gives the same bytes, as strings or Buffers, one context', () => {
    const { contexts, built } = counted();
    const first: TlsCredentialOptions = { ca: 'CA', cert: 'CERT', key: 'KEY' };
    const second: TlsCredentialOptions = { ca: Buffer.from('CA'), cert: Buffer.from('CERT'), key: Buffer.from('KEY') };
    contexts.apply(first);
    contexts.apply(second);
    expect(built).toHaveLength(1);
    expect(second.secureContext).toBe(first.secureContext);
    // The PEM stays: tls.connect prefers the context, and the agent's options still name the credential.
    expect(second.ca).toEqual(Buffer.from('CA'));
  });

  it('gives a different CA, certificate, key or passphrase its own context', () => {
    const { contexts, built } = counted();
    const variants: TlsCredentialOptions[] = [
      { ca: 'CA', cert: 'CERT', key: 'KEY' },
      { ca: 'CA2', cert: 'CERT', key: 'KEY' },
      { ca: 'CA', cert: 'CERT2', key: 'KEY' },
      { ca: 'CA', cert: 'CERT', key: 'KEY2' },
      { ca: 'CA', cert: 'CERT', key: 'KEY', passphrase: 'p' },
      { ca: ['CA', 'CERT'], key: 'KEY' },
      { ca: 'CA\nCERT', key: 'KEY' },
      { ca: ['CA', 'CERT'], key: ['KEY'] },
    ];
    for (const options of variants) contexts.apply(options);
    // The last three hold the same bytes, but an array is its parts (Node sets every key of an
    // array and reads only the first of one string): three different credentials.
    expect(built).toHaveLength(8);
    expect(new Set(variants.map((options) => options.secureContext)).size).toBe(8);
  });

  it('leaves a pfx, a KeyObject, a given context, or no credential at all to Node', () => {
    const { contexts, built } = counted();
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const given = { given: true } as unknown as SecureContext;
    const left: TlsCredentialOptions[] = [
      { pfx: Buffer.from('PFX') },
      { cert: 'CERT', key: [createPrivateKey(privateKey.export({ format: 'pem', type: 'pkcs8' }))] as never },
      { ca: 'CA', secureContext: given },
      {},
    ];
    for (const options of left) contexts.apply(options);
    expect(built).toHaveLength(0);
    expect(left.map((options) => options.secureContext)).toEqual([undefined, undefined, given, undefined]);
  });

  it('keeps at most eight, dropping the oldest', () => {
    const { contexts, built } = counted();
    for (let index = 0; index < 9; index += 1) contexts.apply({ cert: `CERT${index}`, key: 'KEY' });
    expect(contexts.size).toBe(8);
    contexts.apply({ cert: 'CERT8', key: 'KEY' });
    expect(built).toHaveLength(9);
    contexts.apply({ cert: 'CERT0', key: 'KEY' });
    expect(built).toHaveLength(10);
  });
});
