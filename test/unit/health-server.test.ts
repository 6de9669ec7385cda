// The health server answers on a real loopback port; its checks and metrics are injected.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startHealthServer } from '../../operator/src/observability/health-server.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';

async function withServer(
  checks: Parameters<typeof startHealthServer>[1],
  metrics: Parameters<typeof startHealthServer>[2],
  use: (base: string) => Promise<void>,
): Promise<void> {
  const server = await startHealthServer(0, checks, metrics, '127.0.0.1');
  try {
    await use(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.close();
  }
}

describe('health server', () => {
  it('answers 503 naming each failing check, 200 when all pass', async () => {
    let redisDown = true;
    const checks = { redis: async () => (redisDown ? 'PING timed out' : undefined), caches: async () => undefined };
    await withServer(checks, undefined, async (base) => {
      const down = await fetch(`${base}/readyz`);
      expect(down.status).toBe(503);
      expect(await down.text()).toBe('redis: PING timed out\n');
      redisDown = false;
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
    });
  });

  it('answers 200 naming a degraded check, and 503 naming both when another check fails', async () => {
    let redisDown = false;
    const checks = {
      informers: async () => ({ degraded: 'reconciling without namespaces it cannot list, until they list: team-b (HTTP 403)' }),
      redis: async () => (redisDown ? 'PING timed out' : undefined),
    };
    await withServer(checks, undefined, async (base) => {
      const degraded = await fetch(`${base}/readyz`);
      expect(degraded.status).toBe(200);
      expect(await degraded.text()).toBe(
        'ok\ninformers: degraded: reconciling without namespaces it cannot list, until they list: team-b (HTTP 403)\n',
      );
      redisDown = true;
      const down = await fetch(`${base}/readyz`);
      expect(down.status).toBe(503);
      expect(await down.text()).toBe(
        'redis: PING timed out\ninformers: degraded: reconciling without namespaces it cannot list, until they list: team-b (HTTP 403)\n',
      );
    });
  });

  it('answers 500 when the metrics source fails, and keeps serving', async () => {
    const metrics = { contentType: 'text/plain', metrics: () => Promise.reject(new Error('registry broke')) };
    await withServer({}, metrics, async (base) => {
      const failed = await fetch(`${base}/metrics`);
      expect(failed.status).toBe(500);
      expect(await failed.text()).toMatch(/registry broke/);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
    });
  });

  it('answers /metrics while the queue count never comes back (Redis away), without the queue gauge', async () => {
    // A BullMQ count on a connection that retries forever waits as long as Redis is down.
    const operatorMetrics = new OperatorMetrics({
      queueDepth: () => new Promise(() => {}),
      queueDepthTimeoutMs: 50,
      defaultMetrics: false,
    });
    operatorMetrics.reconcileErrors.inc();
    const metrics = { contentType: operatorMetrics.registry.contentType, metrics: () => operatorMetrics.registry.metrics() };
    await withServer({}, metrics, async (base) => {
      const answer = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5_000) });
      expect(answer.status).toBe(200);
      const body = await answer.text();
      expect(body).toMatch(/^chamvi_reconcile_errors_total 1$/m);
      expect(body).not.toMatch(/^chamvi_queue_jobs\{/m);
    });
  });
});
