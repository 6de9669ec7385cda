// /readyz is 503 while the operator's informer caches are not synced, and 200 once they are
// (README "Observability": caches synced on the leader, Redis reachable). The operator (no
// leader election, so it leads at once) starts against an API server it cannot reach: its
// kubeconfig names a TCP relay that drops every connection. Once the relay forwards to the
// real API server, the caches sync and /readyz turns 200.
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { kubeconfigPath, redisUrl } from '../support/cluster.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';

let relay: Server;
let forwarding = false;
const sockets = new Set<Socket>();
let operator: OperatorProcess | undefined;
let kubeconfig: string;

async function readyz(port: number): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: response.status, body: await response.text() };
}

beforeAll(async () => {
  const config = parse(readFileSync(kubeconfigPath(), 'utf8'));
  const apiServer = new URL(config.clusters[0].cluster.server as string);
  relay = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    if (!forwarding) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(apiServer.port), apiServer.hostname);
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const port = (relay.address() as { port: number }).port;
  // Same host (127.0.0.1), so the API server's certificate still matches.
  for (const cluster of config.clusters) cluster.cluster.server = `https://127.0.0.1:${port}`;
  kubeconfig = join(mkdtempSync(join(tmpdir(), 'chamvi-readyz-')), 'kubeconfig');
  writeFileSync(kubeconfig, stringify(config));
});

afterAll(async () => {
  await operator?.kill();
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => relay?.close(() => resolve()));
  if (kubeconfig) rmSync(dirname(kubeconfig), { recursive: true, force: true });
});

describe('/readyz and the informer caches', () => {
  it('answers 503 (caches not synced) while the API server cannot be reached, and 200 once the caches have synced', async () => {
    operator = new OperatorProcess({
      kubeconfig,
      env: {
        REDIS_URL: redisUrl(),
        CHAMVI_REDIS_PREFIX: `readyz${Date.now()}`,
        CHAMVI_LEADER_ELECTION: 'false',
        CHAMVI_WATCH_NAMESPACES: 'chamvi-readyz-none',
        CHAMVI_IDENTITY: 'readyz',
      },
    });
    const port = (await operator.waitForLog('operator starting')).port as number;
    // Not one 200 while the API server stays out of reach; Redis is up, so the caches are why.
    const until = Date.now() + 5_000;
    while (Date.now() < until) {
      const answer = await readyz(port);
      expect(answer.status).toBe(503);
      expect(answer.body).toContain('informers: caches not synced yet');
      expect(answer.body).not.toContain('redis');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(operator.logged('caches synced; reconciling')).toEqual([]);

    forwarding = true;
    await operator.waitForLog('caches synced; reconciling', 60_000);
    const ready = await eventually(
      async () => {
        const answer = await readyz(port);
        return answer.status === 200 ? answer : undefined;
      },
      10_000,
      '/readyz 200',
    );
    expect(ready.body).toBe('ok\n');
  }, 90_000);
});
