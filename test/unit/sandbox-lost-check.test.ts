// Which reads of the sandbox pod say the sandbox is lost, when the verify check got no answer: a
// pod that stands means code in it stopped the toolbox (a failed check); any other pod means the
// finalize is retried into SandboxLost, never a verdict on the work.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { runPodName } from '../../operator/src/reconcile/names.ts';
import { kubernetesSandboxLostCheck, sandboxLostCheck, whySandboxPodLost } from '../../operator/src/workers/sandbox-lost-check.ts';
import { loopbackKubeConfig } from '../support/loopback-kube-config.ts';
import { standingSandboxPod } from '../support/standing-sandbox-pod.ts';

const run = { metadata: { name: 'r', namespace: 'team', uid: 'uid-1' }, spec: {} } as unknown as ParsedCodingRun;

function pod(change: (pod: V1Pod) => void = () => {}): V1Pod {
  const standing = standingSandboxPod(run);
  change(standing);
  return standing;
}

describe('whySandboxPodLost', () => {
  it('says nothing of a Running, Ready pod of the run whose sandbox container runs', () => {
    expect(whySandboxPodLost(pod(), run)).toBeUndefined();
  });

  it.each<[string, V1Pod | undefined, RegExp]>([
    ['no pod at the name', undefined, /^pod team\/\S+ is gone$/],
    ['a pod of another run', pod((p) => (p.metadata!.ownerReferences![0]!.uid = 'uid-2')), /is not the run's \(its controller is/],
    ['a pod being deleted', pod((p) => (p.metadata!.deletionTimestamp = new Date())), /is being deleted/],
    ['a pod whose node is lost (phase Unknown)', pod((p) => (p.status!.phase = 'Unknown')), /is Unknown, not Running/],
    ['a pod that ended', pod((p) => (p.status!.phase = 'Failed')), /is Failed, not Running/],
    [
      'a pod the node lifecycle controller marked NotReady',
      pod((p) => (p.status!.conditions = [{ type: 'Ready', status: 'False', reason: 'NodeNotReady' }])),
      /is not Ready \(NodeNotReady\): its node may be NotReady/,
    ],
    ['a pod with no Ready condition', pod((p) => (p.status!.conditions = [])), /is not Ready: its node may be NotReady/],
    [
      'a pod whose sandbox container is waiting',
      pod((p) => (p.status!.containerStatuses![0]!.state = { waiting: { reason: 'CrashLoopBackOff' } })),
      /'s sandbox container is not running/,
    ],
  ])('calls the sandbox lost for %s', (_case, read, why) => {
    expect(whySandboxPodLost(read, run)).toMatch(why);
  });

  it('reads the claimed warm pool pod named in status, not the fresh name', async () => {
    const claimed = { ...run, status: { podName: 'pool-abc' } } as unknown as ParsedCodingRun;
    const reads: string[] = [];
    const check = sandboxLostCheck(async (namespace, name) => {
      reads.push(`${namespace}/${name}`);
      return undefined;
    });
    expect(await check(claimed)).toBe('pod team/pool-abc is gone');
    expect(reads).toEqual(['team/pool-abc']);
  });
});

describe('kubernetesSandboxLostCheck', () => {
  /** An API server that answers GET of the sandbox pod with `status` and `body`; returns the paths read. */
  async function readThrough(status: number, body: object) {
    const paths: string[] = [];
    const server = createServer((request, response) => {
      paths.push(`${request.method} ${request.url}`);
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kubeConfig = loopbackKubeConfig((server.address() as AddressInfo).port);
    try {
      return { answer: await kubernetesSandboxLostCheck(kubeConfig)(run).catch((error: unknown) => error), paths };
    } finally {
      server.close();
    }
  }

  it('reads the pod once and says nothing of one that stands', async () => {
    const { answer, paths } = await readThrough(200, { apiVersion: 'v1', kind: 'Pod', ...pod() });
    expect(answer).toBeUndefined();
    expect(paths).toEqual([`GET /api/v1/namespaces/team/pods/${runPodName(run)}`]);
  });

  it('calls a pod the API server does not have gone', async () => {
    const { answer } = await readThrough(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 });
    expect(answer).toMatch(/ is gone$/);
  });

  it('throws when the read fails otherwise: it tells nothing', async () => {
    const { answer } = await readThrough(500, { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 500 });
    expect(answer).toBeInstanceOf(Error);
  });
});
