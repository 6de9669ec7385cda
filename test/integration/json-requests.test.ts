// The lighter API client for the per-step writes (operator/src/kube/json-requests.ts) against
// the real API server: what it sends lands as client-node would send it, and every refusal
// reads through api-errors.ts as client-node's ApiException does, since the callers decide on
// them (the transcript writer's 404/409/422 paths, the status writer's conflicts).
import { KubeConfig } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiRefusal, isAlreadyExists, isConflict, isNotFound, statusCodeOf } from '../../operator/src/kube/api-errors.ts';
import { reuseConnections } from '../../operator/src/kube/connection-reuse.ts';
import { JSON_PATCH, KubeApiError, jsonRequests, type JsonRequests } from '../../operator/src/kube/json-requests.ts';
import { isForbidden } from '../../operator/src/workers/job-retry.ts';
import { createNamespace, kubeconfigPath, kubectlOk } from '../support/cluster.ts';

const NS = 'json-requests';
const configMaps = `/api/v1/namespaces/${NS}/configmaps`;
let json: JsonRequests;

beforeAll(async () => {
  await createNamespace(NS);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  json = jsonRequests(reuseConnections(kubeConfig));
}, 60_000);

/** The error a request fails with (the test fails if it does not). */
async function refusal(sent: Promise<unknown>): Promise<unknown> {
  return sent.then(
    () => expect.unreachable('the API server accepted it'),
    (error: unknown) => error,
  );
}

describe('jsonRequests', () => {
  it('creates and patches a ConfigMap; the answer is the object as stored', async () => {
    const created = await json.send<{ metadata: { uid: string }; data: Record<string, string> }>('POST', configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'one', labels: { owner: 'me' } },
      data: { a: '1' },
    });
    expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.data).toEqual({ a: '1' });

    const patched = await json.send<{ data: Record<string, string> }>(
      'PATCH',
      `${configMaps}/one`,
      [
        { op: 'test', path: '/metadata/labels/owner', value: 'me' },
        { op: 'add', path: '/data/b', value: '2' },
      ],
      JSON_PATCH,
    );
    expect(patched.data).toEqual({ a: '1', b: '2' });

    await json.sendIgnoringAnswer('PATCH', `${configMaps}/one`, [{ op: 'add', path: '/data/c', value: '3' }], JSON_PATCH);
    expect(JSON.parse(await kubectlOk(['get', 'configmap', 'one', '-n', NS, '-o', 'jsonpath={.data}']))).toEqual({
      a: '1',
      b: '2',
      c: '3',
    });
  });

  it('refusals carry the status code and the API server message, as client-node errors do', async () => {
    await json.sendIgnoringAnswer('POST', configMaps, { metadata: { name: 'two' }, data: {} });

    const exists = await refusal(json.sendIgnoringAnswer('POST', configMaps, { metadata: { name: 'two' }, data: {} }));
    expect(exists).toBeInstanceOf(KubeApiError);
    expect(isAlreadyExists(exists)).toBe(true);
    expect(isConflict(exists)).toBe(true);

    const missing = await refusal(json.send('PATCH', `${configMaps}/nowhere`, [{ op: 'add', path: '/data/x', value: 'y' }], JSON_PATCH));
    expect(isNotFound(missing)).toBe(true);

    // A failed JSON Patch test: 422, with the API server's own message (not our error's text).
    const wrongOwner = await refusal(
      json.send('PATCH', `${configMaps}/two`, [{ op: 'test', path: '/metadata/labels/owner', value: 'me' }], JSON_PATCH),
    );
    expect(statusCodeOf(wrongOwner)).toBe(422);
    expect(apiRefusal(wrongOwner)?.message).toMatch(/^the server rejected our request/);

    const invalid = await refusal(json.send('POST', configMaps, { metadata: { name: 'Not_A_Name' } }));
    expect(apiRefusal(invalid)).toMatchObject({ code: 422, message: expect.stringContaining('Not_A_Name') });
    expect(isForbidden(invalid)).toBe(false);
  });
});
