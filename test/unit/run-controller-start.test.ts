// A run controller stopped while its start() waits for the caches' first lists (the lease lost
// while they filled) goes no further once the lists come back: no pool loop timer on the
// stopped controller (it would hold the old caches for good), no "reconciling" on a replica
// that no longer leads. The API server is a local one that holds every list until told.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunController } from '../../operator/src/controller/run-controller.ts';
import { POOL_RESYNC_MS } from '../../operator/src/controller/warm-pool-loop.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import type { RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';

const EMPTY_LIST = JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '1' }, items: [] });

/** Holds every list until release(); answers each watch with an empty stream. */
async function slowApiServer() {
  const held: ServerResponse[] = [];
  let released = false;
  let arrived: () => void = () => {};
  const answer = (response: ServerResponse) => response.writeHead(200, { 'content-type': 'application/json' }).end(EMPTY_LIST);
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (new URL(request.url ?? '/', 'http://x').searchParams.get('watch') === 'true') {
      response.writeHead(200, { 'content-type': 'application/json' }).end();
      return;
    }
    if (released) return answer(response);
    held.push(response);
    arrived();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kubeConfig = loopbackKubeConfig((server.address() as AddressInfo).port, { token: 't' });
  return {
    kubeConfig,
    server,
    /** Resolves once `count` lists are held. */
    async listsHeld(count: number): Promise<void> {
      while (held.length < count) await new Promise<void>((resolve) => (arrived = resolve));
    },
    release(): void {
      released = true;
      for (const response of held.splice(0)) answer(response);
    },
  };
}

const servers: Array<Awaited<ReturnType<typeof slowApiServer>>['server']> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe('a run controller stopped while its caches fill', () => {
  it('starts no pool loop timer, calls no cache live and logs no "reconciling" once the lists come back', async () => {
    const api = await slowApiServer();
    servers.push(api.server);
    const config = loadOperatorConfig(
      { allowRepo: ['https://github.com/acme/*'], warmPools: [{ name: 'pool', namespace: 'team', size: 1 }], networkPolicy: false },
      {},
    );
    const gateway = { createPoolPod: vi.fn() } as unknown as WarmPoolGateway;
    const infos: string[] = [];
    const controller = new RunController(
      api.kubeConfig,
      config,
      { kube: {} as KubeGateway, agent: {} as RunAgent, events: {} as EventRecorder, warmPools: { gateway } },
      { info: (_fields, message) => infos.push(message), warn: () => {}, error: () => {} },
    );
    const setInterval = vi.spyOn(globalThis, 'setInterval');
    const starting = controller.start();
    // Runs, pods, NetworkPolicies, ConfigMaps, the finished-runs ConfigMap: one namespace each.
    await api.listsHeld(5);
    controller.stop();
    api.release();
    await starting;
    expect(setInterval.mock.calls.filter(([, ms]) => ms === POOL_RESYNC_MS)).toEqual([]);
    expect(infos).not.toContain('caches synced; reconciling');
    expect(controller.liveRuns).toBeUndefined();
    expect(gateway.createPoolPod).not.toHaveBeenCalled();
  });
});
