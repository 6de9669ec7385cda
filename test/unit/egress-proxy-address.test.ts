// Issue #12: the proxy's address is read again once the cache is older than its TTL, so a
// Service created again (a new ClusterIP) reaches the next sandbox; a failed read keeps the last
// address, and fails only while there has never been one. The clock and the read are injected;
// test/e2e/egress-proxy-address.test.ts shows the same against a real API server's Service.
import { describe, expect, it } from 'vitest';
import {
  CachedAddress,
  EgressProxyAddressError,
  PROXY_ADDRESS_TTL_MS,
  egressProxyAddressSource,
} from '../../operator/src/egress/egress-proxy-address.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { KubeConfig } from '@kubernetes/client-node';

function fixture(answers: Array<string | Error>) {
  let clock = 0;
  let reads = 0;
  const logged: Array<{ level: string; message: string; fields: object }> = [];
  const logger = {
    info: (fields: object, message: string) => logged.push({ level: 'info', message, fields }),
    warn: (fields: object, message: string) => logged.push({ level: 'warn', message, fields }),
  };
  const address = new CachedAddress(
    'Service chamvi-system/proxy',
    async () => {
      const answer = answers[Math.min(reads++, answers.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer;
    },
    logger,
    { now: () => clock },
  );
  return {
    address,
    logged,
    reads: () => reads,
    advance: (ms: number) => (clock += ms),
  };
}

describe('the egress proxy address', () => {
  it('is read once within the TTL, however many sandboxes ask, and again after it', async () => {
    const f = fixture(['10.96.0.10', '10.96.0.20']);
    expect(await Promise.all([f.address.get(), f.address.get(), f.address.get()])).toEqual(['10.96.0.10', '10.96.0.10', '10.96.0.10']);
    f.advance(PROXY_ADDRESS_TTL_MS - 1);
    expect(await f.address.get()).toBe('10.96.0.10');
    expect(f.reads()).toBe(1);
    f.advance(1);
    expect(await f.address.get()).toBe('10.96.0.20');
    expect(f.reads()).toBe(2);
    expect(f.logged.filter((line) => line.message === 'egress proxy address').map((line) => line.fields)).toEqual([
      { proxy: 'Service chamvi-system/proxy', address: '10.96.0.10', previous: undefined },
      { proxy: 'Service chamvi-system/proxy', address: '10.96.0.20', previous: '10.96.0.10' },
    ]);
  });

  it('keeps the last address when a read fails, and tries again only after the TTL', async () => {
    const f = fixture(['10.96.0.10', new Error('services "proxy" not found'), '10.96.0.30']);
    await f.address.get();
    f.advance(PROXY_ADDRESS_TTL_MS);
    expect(await f.address.get()).toBe('10.96.0.10');
    expect(f.logged.at(-1)).toMatchObject({ level: 'warn', fields: { err: 'services "proxy" not found', address: '10.96.0.10' } });
    expect(await f.address.get()).toBe('10.96.0.10');
    expect(f.reads()).toBe(2);
    f.advance(PROXY_ADDRESS_TTL_MS);
    expect(await f.address.get()).toBe('10.96.0.30');
  });

  it('fails, naming the Service and why, while no read has succeeded yet', async () => {
    const f = fixture([new Error('services "proxy" is forbidden'), '10.96.0.10']);
    const failed = await f.address.get().catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(EgressProxyAddressError);
    expect((failed as Error).message).toBe('egress proxy Service chamvi-system/proxy: services "proxy" is forbidden');
    f.advance(PROXY_ADDRESS_TTL_MS);
    expect(await f.address.get()).toBe('10.96.0.10');
  });

  it('is read from the Service, the host, or not at all (a fixed address), in that order of precedence', () => {
    const source = (egressProxy: object) =>
      egressProxyAddressSource(loadOperatorConfig({ egressProxy }, {}), new KubeConfig(), { info: () => {}, warn: () => {} });
    expect(source({ address: '192.0.2.2', service: 'proxy' })).toBeUndefined();
    expect(source({ host: '192.0.2.2' })).toBeUndefined();
    expect(source({})).toBeUndefined();
    expect(source({ service: 'proxy', namespace: 'infra', host: 'proxy.example' })).toMatchObject({ what: 'Service infra/proxy' });
    expect(source({ host: 'proxy.example' })).toMatchObject({ what: 'host proxy.example' });
  });
});
