// One watched namespace the operator may not list holds back no other (issue: a tenant with
// `admin` there deletes the operator's RoleBinding, and at the next leadership term nothing was
// reconciled anywhere). Each controller (runs, schedules, evals) watches two namespaces through
// a local API server that answers every list in team-b with 403 until told otherwise: start()
// resolves, team-a's object is reconciled, team-b's is not; once team-b lists, its object is
// reconciled too. Real informers, queue and grouping; only the reconcilers are stubbed.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadOperatorConfig, type OperatorConfig } from '../../operator/src/config/operator-config.ts';
import { EvalController } from '../../operator/src/controller/eval-controller.ts';
import { RunController, type ControllerLogger } from '../../operator/src/controller/run-controller.ts';
import { ScheduleController } from '../../operator/src/controller/schedule-controller.ts';
import type { EvalGateway } from '../../operator/src/kube/eval-gateway.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { ScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';
import type { RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';

const CUSTOM = /^\/apis\/chamvi\.dev\/v1alpha1\/namespaces\/([^/]+)\/([^/?]+)/;
const NAMESPACED = /\/namespaces\/([^/]+)\//;

/**
 * Lists: one object of each custom kind per namespace (named `<plural>-<namespace>`), nothing
 * of the core kinds; every list in a refused namespace answers 403 as the API server does.
 * Watches stay open and quiet.
 */
async function apiServer() {
  const refused = new Set<string>(['team-b']);
  const lists = new Map<string, number>();
  const open = new Set<ServerResponse>();
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (url.searchParams.get('watch') === 'true') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.flushHeaders();
      open.add(response);
      return;
    }
    const namespace = NAMESPACED.exec(url.pathname)?.[1] ?? '';
    lists.set(namespace, (lists.get(namespace) ?? 0) + 1);
    if (refused.has(namespace)) {
      const status = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403, message: 'forbidden' };
      response.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify(status));
      return;
    }
    const custom = CUSTOM.exec(url.pathname);
    const items = custom
      ? [
          {
            apiVersion: 'chamvi.dev/v1alpha1',
            metadata: {
              namespace,
              name: `${custom[2]}-${namespace}`,
              uid: `uid-${custom[2]}-${namespace}`,
              resourceVersion: '1',
              generation: 1,
              creationTimestamp: '2025-01-01T00:00:00Z',
            },
            spec: {},
          },
        ]
      : [];
    response
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '1' }, items }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    kubeConfig: loopbackKubeConfig((server.address() as AddressInfo).port, { token: 't' }),
    lists: (namespace: string) => lists.get(namespace) ?? 0,
    allow: (namespace: string) => refused.delete(namespace),
    async close(): Promise<void> {
      for (const response of open) response.end();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

interface ControllerUnderTest {
  start(): Promise<void>;
  stop(): void;
  reconciler: { reconcile(key: string): Promise<unknown> };
}

const controllers: Array<{
  name: string;
  /** The object each namespace holds whose key the controller reconciles. */
  plural: string;
  /** Its informers per namespace. */
  informers: number;
  make: (kubeConfig: KubeConfig, config: OperatorConfig, logger: ControllerLogger) => ControllerUnderTest;
}> = [
  {
    name: 'run controller',
    plural: 'codingruns',
    informers: 5,
    make: (kubeConfig, config, logger) =>
      new RunController(kubeConfig, config, { kube: {} as KubeGateway, agent: {} as RunAgent, events: {} as EventRecorder }, logger),
  },
  {
    name: 'schedule controller',
    plural: 'codingschedules',
    informers: 2,
    make: (kubeConfig, config, logger) =>
      new ScheduleController(kubeConfig, config, { kube: {} as ScheduleGateway, events: { record: async () => undefined } }, logger),
  },
  {
    name: 'eval controller',
    plural: 'codingevals',
    informers: 2,
    make: (kubeConfig, config, logger) => new EvalController(kubeConfig, config, {} as EvalGateway, logger),
  },
];

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !condition();) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(controllers)('$name with a watched namespace whose lists are refused (403)', ({ plural, informers, make }) => {
  it('starts, reconciles the other namespace, and reconciles the refused one once it lists', async () => {
    const api = await apiServer();
    cleanups.push(() => api.close());
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], watchNamespaces: ['team-a', 'team-b'] }, {});
    const warnings: Array<Record<string, unknown>> = [];
    const logger: ControllerLogger = {
      info: () => undefined,
      warn: (fields) => warnings.push(fields as Record<string, unknown>),
      error: () => undefined,
    };
    const controller = make(api.kubeConfig, config, logger);
    cleanups.push(() => controller.stop());
    const reconciled: string[] = [];
    vi.spyOn(controller.reconciler, 'reconcile').mockImplementation(async (key: string) => {
      reconciled.push(key);
      return undefined;
    });

    const started = await Promise.race([
      controller.start().then(() => 'started'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting for team-b after 5 s'), 5_000)),
    ]);
    expect(started).toBe('started');
    await until(() => reconciled.includes(`team-a/${plural}-team-a`), `team-a/${plural}-team-a reconciled`);
    // Retried in the background; one warning for team-b, not one per informer and retry.
    await until(() => api.lists('team-b') >= 3 * informers, 'team-b listed again');
    expect(reconciled.filter((key) => key.startsWith('team-b/'))).toEqual([]);
    expect(warnings.filter((fields) => fields.namespace === 'team-b')).toHaveLength(1);

    api.allow('team-b');
    // The informers back off up to 30 s on a 403; these tried a few times, so a second or two.
    await until(() => reconciled.includes(`team-b/${plural}-team-b`), `team-b/${plural}-team-b reconciled`, 20_000);
  }, 30_000);
});
