// What `helm install` prints after it (templates/NOTES.txt) about a stopping pod's wait on an
// unreachable Redis: a warning when the grace period cuts the wait a failover needs (with
// Sentinels, the chart's default grace of 30 s cuts 40 s to 21 s, below Redis's default
// down-after-milliseconds), naming the wait used, as the operator computes it, and the grace
// that keeps it whole; nothing when the wait fits.
import { describe, expect, it } from 'vitest';
import { redisUnreachableStopMs } from '../../operator/src/workers/worker-stop.ts';
import { chartDir, helm } from '../support/helm.ts';

const SENTINELS = 'config.redisSentinels={sentinel-0.redis:26379,sentinel-1.redis:26379}';

/** The notes `helm install` prints for these values (a client-side dry run: nothing is installed). */
async function notes(...sets: string[]): Promise<string> {
  const args = ['install', 'notes', chartDir, '--namespace', 'chamvi-chart-notes', '--dry-run=client'];
  // The test control plane applied crds/ itself (as chart.test.ts installs).
  for (const set of ['config.allowRepo={https://github.com/acme/*}', 'crds.install=false', ...sets]) args.push('--set', set);
  const result = await helm(args);
  if (result.code !== 0) throw new Error(`helm install --dry-run failed: ${result.stderr}`);
  return result.stdout.slice(result.stdout.indexOf('\nNOTES:'));
}

/** The operator's wait for the chart's grace (its shutdownTimeoutSeconds is the grace less 5), in seconds. */
const operatorWaitSeconds = (grace: number, redisFailoverSeconds: number | undefined, mode: 'sentinel' | 'standalone') =>
  redisUnreachableStopMs(mode, { redisFailoverSeconds, shutdownTimeoutSeconds: grace - 5 }) / 1000;

describe("the install notes on a stopping pod's wait for Redis", () => {
  it('warn behind Sentinels under the default grace, naming the wait the operator uses and the grace for the whole 40 s', async () => {
    const text = await notes(SENTINELS);
    expect(operatorWaitSeconds(30, undefined, 'sentinel')).toBe(21);
    expect(text).toContain(
      'WARNING: a stopping operator pod takes an unreachable Redis for gone after 21 s, not the\n40 s a failover may take',
    );
    expect(text).toContain('set terminationGracePeriodSeconds=49');
  });

  it.each([10, 11, 48])('name the wait the operator uses with a grace of %i s', async (grace) => {
    const text = await notes(SENTINELS, `terminationGracePeriodSeconds=${grace}`);
    expect(text).toContain(`for gone after ${operatorWaitSeconds(grace, undefined, 'sentinel')} s, not the\n40 s`);
  });

  it('say nothing once the grace keeps the whole wait, or with one server', async () => {
    expect(operatorWaitSeconds(49, undefined, 'sentinel')).toBe(40);
    expect(await notes(SENTINELS, 'terminationGracePeriodSeconds=49')).not.toContain('unreachable Redis');
    expect(await notes()).not.toContain('unreachable Redis');
  });

  it("warn for redisFailoverSeconds the grace cuts, one server's included, and only then", async () => {
    expect(operatorWaitSeconds(23, 15, 'standalone')).toBe(14);
    const cut = await notes('config.redisFailoverSeconds=15', 'terminationGracePeriodSeconds=23');
    expect(cut).toContain('for gone after 14 s, not the\n15 s a failover may take (config.redisFailoverSeconds)');
    expect(cut).toContain('set terminationGracePeriodSeconds=24.');
    expect(operatorWaitSeconds(24, 15, 'standalone')).toBe(15);
    expect(await notes('config.redisFailoverSeconds=15', 'terminationGracePeriodSeconds=24')).not.toContain('unreachable Redis');
  });
});

describe('the install notes on cluster-wide mode', () => {
  it('warn, when watchNamespaces is empty, that the operator is close to cluster-admin, and say how to list namespaces', async () => {
    const text = await notes();
    expect(text).toContain('WARNING: config.watchNamespaces is empty, so the operator runs cluster-wide');
    expect(text).toContain('can act as any ServiceAccount in any namespace');
    expect(text).toContain("--set 'config.watchNamespaces={team-a,team-b}'");
  });

  it('say nothing of it once watchNamespaces lists namespaces', async () => {
    expect(await notes('config.watchNamespaces={team-a}')).not.toContain('config.watchNamespaces is empty');
  });
});
