// Security #11.3: the adapters that read Secrets for runs, over real HTTP with the real
// client-node, against a loopback server answering the Secret GET as the API server does.
// The worker's read (secretValue) refuses an unlabelled Secret's value; the controller's read
// (secretKeysAndLabels) hands validation the labels it judges by.
import type { KubeConfig } from '@kubernetes/client-node';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { kubernetesRunResources } from '../../operator/src/workers/run-resources.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';

const isRunFailure = (error: unknown, reason: string): boolean => RunFailure.isInstance(error) && error.reason === reason;

const KEY = 'sk-namespace-key-5b7e0c';
let labels: Record<string, string> | undefined;
let server: Server;
let kubeConfig: KubeConfig;

beforeEach(async () => {
  labels = undefined;
  server = createServer((request, response) => {
    if (request.method === 'GET' && request.url?.startsWith('/api/v1/namespaces/team-b/secrets/llm')) {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'llm', namespace: 'team-b', ...(labels ? { labels } : {}) },
          data: { apiKey: Buffer.from(KEY).toString('base64') },
        }),
      );
      return;
    }
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  kubeConfig = loopbackKubeConfig((server.address() as AddressInfo).port);
});

afterEach(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('security #11.3 Secrets opt in to runs, checked where they are read', () => {
  it('a worker refuses the value of a Secret without the usable-by-runs label, saying which label to add', async () => {
    const error = await kubernetesRunResources(kubeConfig)
      .secretValue('team-b', 'llm', 'apiKey')
      .catch((e: unknown) => e);
    expect(isRunFailure(error, 'SecretNotAllowed')).toBe(true);
    expect((error as Error).message).toContain('kubectl label secret llm -n team-b chamvi.dev/usable-by-runs=true');
    expect((error as Error).message).not.toContain(KEY);
  });

  it('a worker gets the value of a labelled Secret, and undefined for a missing one', async () => {
    labels = { 'chamvi.dev/usable-by-runs': 'true' };
    const resources = kubernetesRunResources(kubeConfig);
    expect(await resources.secretValue('team-b', 'llm', 'apiKey')).toBe(KEY);
    expect(await resources.secretValue('team-b', 'other', 'apiKey')).toBeUndefined();
  });

  it('the controller reads the keys and labels of a referenced Secret, never its values', async () => {
    labels = { 'chamvi.dev/usable-by-runs': 'true', team: 'b' };
    const gateway = createKubeGateway(kubeConfig);
    const found = await gateway.secretKeysAndLabels('team-b', 'llm');
    expect(found).toEqual({ keys: ['apiKey'], labels: { 'chamvi.dev/usable-by-runs': 'true', team: 'b' } });
    expect(JSON.stringify(found)).not.toContain(KEY);
    expect(await gateway.secretKeysAndLabels('team-b', 'other')).toBeUndefined();
  });
});
