// The namespace policy cache keeps only what a read within its TTL could still use: namespaces
// made per pull request come and go, and an entry for each one ever seen grew without bound.
import { describe, expect, it } from 'vitest';
import { NAMESPACE_POLICY_TTL_MS, cachedNamespacePolicyReader } from '../../operator/src/kube/namespace-policy-reader.ts';

function reader() {
  const reads: string[] = [];
  let clock = 1_000_000;
  const cached = cachedNamespacePolicyReader(
    async (namespace) => {
      reads.push(namespace);
      return {};
    },
    () => clock,
  );
  return { cached, reads, advance: (ms: number) => (clock += ms) };
}

describe('cachedNamespacePolicyReader', () => {
  it('forgets the namespaces not read within the TTL: 1,000 namespaces a few seconds apart leave a handful', async () => {
    const { cached, reads, advance } = reader();
    for (let index = 0; index < 1_000; index++) {
      await cached.policyOf(`pr-${index}`);
      advance(1_000);
    }
    expect(reads).toHaveLength(1_000);
    // At most those read within two TTLs (one sweep per TTL).
    expect(cached.cachedNamespaces).toBeLessThanOrEqual((2 * NAMESPACE_POLICY_TTL_MS) / 1_000);
    advance(2 * NAMESPACE_POLICY_TTL_MS);
    await cached.policyOf('team');
    expect(cached.cachedNamespaces).toBe(1);
  });

  it('reads a namespace asked about steadily no more often than once per TTL, forgetting others around it', async () => {
    const { cached, reads, advance } = reader();
    for (let second = 0; second < 60; second++) {
      await Promise.all([cached.policyOf('team'), cached.policyOf('team'), cached.policyOf(`pr-${second}`)]);
      advance(1_000);
    }
    const teamReads = reads.filter((namespace) => namespace === 'team').length;
    expect(teamReads).toBe(Math.ceil(60_000 / NAMESPACE_POLICY_TTL_MS));
    expect(cached.cachedNamespaces).toBeLessThanOrEqual(1 + (2 * NAMESPACE_POLICY_TTL_MS) / 1_000);
  });

  it('keeps a newer read when an older read of the same namespace fails after it', async () => {
    let clock = 0;
    const answers: Array<{ resolve: (annotations: Record<string, string>) => void; reject: (error: Error) => void }> = [];
    let reads = 0;
    const cached = cachedNamespacePolicyReader(
      (_namespace) =>
        new Promise((resolve, reject) => {
          // The first two reads are answered by the test; any later one at once, with no annotation.
          if (++reads > 2) resolve({});
          else answers.push({ resolve, reject });
        }),
      () => clock,
    );
    const older = cached.policyOf('team');
    clock += NAMESPACE_POLICY_TTL_MS;
    const newer = cached.policyOf('team');
    answers[1]!.resolve({ 'chamvi.dev/max-active-runs': '3' });
    await expect(newer).resolves.toMatchObject({ maxActiveRuns: 3 });
    answers[0]!.reject(new Error('API server unreachable'));
    await expect(older).rejects.toThrow('unreachable');
    await expect(cached.policyOf('team')).resolves.toMatchObject({ maxActiveRuns: 3 });
    expect(reads).toBe(2);
  });
});
