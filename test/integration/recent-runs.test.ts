// A job's read of its run (kube/recent-runs.ts) against the real API server and the operator's
// own run informer. The leader's cache serves the read once it holds the newest copy the API
// server gave this process (resourceVersions as this API server makes them: the rule rests on
// its answers and its watch events comparing in order); a cache whose watch stopped before this
// process's last write is not used, and the read is a GET that sees that write.
import { CustomObjectsApi, KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, PLURAL, type CodingRun } from '../../operator/src/api/index.ts';
import { customObjectSource } from '../../operator/src/controller/custom-object-source.ts';
import { Informer } from '../../operator/src/controller/informer.ts';
import { jsonRequests, type JsonRequests } from '../../operator/src/kube/json-requests.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { isAtLeastVersion, RecentRuns, rememberingRuns } from '../../operator/src/kube/recent-runs.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';

const NS = 'recent-runs';
const runs = `/apis/${API_VERSION}/namespaces/${NS}/${PLURAL}`;
let kubeConfig: KubeConfig;
let json: JsonRequests;
const informers: Array<Informer<CodingRun>> = [];

beforeAll(async () => {
  await createNamespace(NS);
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  json = jsonRequests(kubeConfig);
}, 60_000);
afterAll(async () => {
  for (const informer of informers) informer.stop();
  await deleteNamespace(NS);
});

async function createRun(name: string): Promise<void> {
  await json.send('POST', runs, {
    apiVersion: API_VERSION,
    kind: 'CodingRun',
    metadata: { name },
    spec: {
      task: 'Fix it',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
    },
  });
}

/** The operator's pieces as main.ts wires them: a run informer, RecentRuns over it, the remembering gateway; GETs counted, the clock ours. */
async function wired() {
  const informer = new Informer<CodingRun>(
    new Watch(kubeConfig),
    customObjectSource<CodingRun>(kubeConfig.makeApiClient(CustomObjectsApi), NS, PLURAL),
    { onChange: () => undefined, onDelete: () => undefined },
    { warn: () => undefined },
  );
  informers.push(informer);
  await informer.start();
  const raw = createKubeGateway(kubeConfig);
  let gets = 0;
  let clock = 0;
  const recent = new RecentRuns(
    (namespace, name) => {
      gets += 1;
      return raw.getRun(namespace, name);
    },
    () => informer,
    2_000,
    () => clock,
  );
  const kube: KubeGateway = rememberingRuns(raw, recent);
  return { informer, recent, kube, gets: () => gets, advance: (ms: number) => (clock += ms) };
}

const writeMessage = (kube: KubeGateway, name: string, message: string) =>
  kube.patchRunStatus(NS, name, [{ op: 'add', path: '/status', value: { phase: 'Running', message } }]);

describe("a job's read of its run", () => {
  it("is served by the leader's cache, with another client's spec edit in it, and no GET", async () => {
    const t = await wired();
    await createRun('edited');
    const written = await writeMessage(t.kube, 'edited', 'step 1');
    // A lowered budget: a spec field a run's author may change while it runs.
    await json.send('PATCH', `${runs}/edited`, { spec: { budget: { maxSteps: 7 } } }, 'application/merge-patch+json');
    await eventually(async () => (t.informer.get(NS, 'edited')?.metadata.generation === 2 ? true : undefined));
    // The watch's copy compares as newer than the write's answer this process was given.
    expect(isAtLeastVersion(t.informer.get(NS, 'edited')?.metadata.resourceVersion, written.metadata.resourceVersion!)).toBe(true);
    t.advance(60_000);

    const read = await t.recent.read(NS, 'edited');
    expect((read?.spec as { budget?: { maxSteps?: number } }).budget?.maxSteps).toBe(7);
    expect(read?.status?.message).toBe('step 1');
    expect(t.gets()).toBe(0);
  });

  it("is a GET when the cache's watch stopped before this process's last write", async () => {
    const t = await wired();
    await createRun('unwatched');
    await writeMessage(t.kube, 'unwatched', 'step 1');
    await eventually(async () => (t.informer.get(NS, 'unwatched')?.status?.message === 'step 1' ? true : undefined));
    t.informer.stop();
    await writeMessage(t.kube, 'unwatched', 'step 2');
    t.advance(60_000);

    const read = await t.recent.read(NS, 'unwatched');
    expect(t.informer.get(NS, 'unwatched')?.status?.message).toBe('step 1');
    expect(read?.status?.message).toBe('step 2');
    expect(t.gets()).toBe(1);
  });
});
