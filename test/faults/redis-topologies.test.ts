// #17.2: Redis beyond one server. The operator runs against a master watched by three
// Sentinels, and against a six-node Redis Cluster, each made of real redis-server processes
// with passwords; mid-run the master holding the operator's keys is SIGKILLed (once its
// replica has every write) and a replica takes over. No run may be lost:
//
//   held     inside a model call (a delayed reply of the fake server) across the failover
//   waiting  parked in WaitingForApproval across it, approved after
//   after    started on the promoted master
//
// Every run must end Succeeded with exactly its scripted usage, and the model called once
// per step. In the Cluster, every key the operator wrote must carry the hash tag {prefix}:
// BullMQ's scripts touch several keys of a queue at once, which a Cluster refuses (CROSSSLOT)
// unless they share a slot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import {
  approvalTurns,
  codingRun,
  expectedTotals,
  fakeReplyOf,
  greetTurns,
  operatorStory,
  scriptConfigMap,
  scriptedModel,
  type RunStatus,
  type ScriptTurn,
} from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import { eventually } from '../support/operator-process.ts';
import { RedisCluster, SentinelSet } from '../support/redis-topologies.ts';

const TIMEOUT = '3m';
const FINISH_MS = 150_000;
/** Long enough that the failover (about 1-5 s) happens while the model call is out. */
const HELD_REPLY_MS = 12_000;

const APPROVAL_TURNS = approvalTurns(10);
const PLAIN_TURNS = greetTurns(11);
const HELD_TURNS = greetTurns(12);

interface Topology {
  /** The operator's Redis settings: the password in the URL, the shape in env. */
  redisUrl: string;
  env: Record<string, string>;
  /** Crashes the master holding the operator's keys and waits for the failover. */
  crash(prefix: string): Promise<number>;
  stop(): void;
}

interface Scene {
  world: FaultScene;
  fake: FakeOpenAIServer;
  topology: Topology;
  failoverMs: number;
}

async function setUpAndFailOver(namespace: string, topology: Topology): Promise<Scene> {
  const fake = await startFakeOpenAIServer();
  fake.enqueue(fakeReplyOf(HELD_TURNS[0]!), fakeReplyOf(HELD_TURNS[1]!, HELD_REPLY_MS), fakeReplyOf(HELD_TURNS[2]!));
  const world = await FaultScene.start({
    namespace,
    redisUrl: topology.redisUrl,
    prefix: namespace.replace(/-/g, ''),
    env: { ...topology.env, CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL },
  });
  const { ns, repoUrl } = world;
  try {
    await ns.apply(
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
        stringData: { apiKey: 'sk-faults-topology' },
      },
      scriptConfigMap('approval-script', APPROVAL_TURNS),
      scriptConfigMap('plain-script', PLAIN_TURNS),
    );
    const budget = { budget: { timeout: TIMEOUT } };
    await ns.apply(codingRun('waiting', repoUrl, scriptedModel('approval-script'), { ...budget, approval: { tools: ['bash'] } }));
    await ns.waitFor('waiting', 'to wait for approval', (status) => status.phase === 'WaitingForApproval');
    await ns.apply(
      codingRun(
        'held',
        repoUrl,
        { provider: 'openai-compatible', name: 'fake-coder', baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } },
        budget,
      ),
    );
    await eventually(async () => (fake.requests.length >= 2 ? true : undefined), 60_000, 'held to wait on its second model call');
    const failoverMs = await topology.crash(world.prefix);
    return { world, fake, topology, failoverMs };
  } catch (error) {
    console.error(operatorStory(world.operator));
    await world.stop();
    await fake.stop();
    throw error;
  }
}

async function tearDown(scene: Scene | undefined): Promise<void> {
  await scene?.world.stop();
  await scene?.fake.stop();
  scene?.topology.stop();
}

function expectSucceededAsScripted(status: RunStatus, turns: ScriptTurn[]): void {
  const totals = expectedTotals(turns);
  expect(status, JSON.stringify(status)).toMatchObject({ phase: 'Succeeded', steps: totals.steps, toolCalls: totals.toolCalls });
  expect(status.usage).toEqual(totals.usage);
}

/** The three runs' story, the same for both shapes. */
function noRunLost(scene: () => Scene) {
  const succeeded = async (name: string, turns: ScriptTurn[]) => {
    const status = await scene().world.finished(name, FINISH_MS);
    expectSucceededAsScripted(status, turns);
  };

  it('finishes the run whose model call was out during the failover, calling the model once per step', async () => {
    console.info(`failover took ${scene().failoverMs} ms`);
    await succeeded('held', HELD_TURNS);
    expect(scene().fake.requests).toHaveLength(3);
  });

  it('resumes the run that waited for approval when it is approved on the promoted master', async () => {
    const { ns } = scene().world;
    const waiting = await ns.status('waiting');
    expect(waiting.phase).toBe('WaitingForApproval');
    await ns.answer('waiting', waiting.pendingApproval!.id, 'approve');
    await succeeded('waiting', APPROVAL_TURNS);
  });

  it('runs a new run to success after the failover', async () => {
    const { ns, repoUrl } = scene().world;
    await ns.apply(codingRun('after', repoUrl, scriptedModel('plain-script'), { budget: { timeout: TIMEOUT } }));
    await succeeded('after', PLAIN_TURNS);
  });
}

describe('Redis behind Sentinel: the master crashes mid-run', () => {
  let scene: Scene;
  beforeAll(async () => {
    const sentinels = await SentinelSet.start('redis-sentinel-faults');
    scene = await setUpAndFailOver('faults-redis-sentinel', {
      redisUrl: `redis://:${encodeURIComponent(sentinels.password)}@sentinel-named-master.invalid:6379`,
      env: {
        REDIS_SENTINELS: sentinels.addresses.join(','),
        REDIS_SENTINEL_MASTER: sentinels.masterName,
        REDIS_SENTINEL_PASSWORD: sentinels.sentinelPassword,
      },
      crash: async () => (await sentinels.crashMaster()).failoverMs,
      stop: () => sentinels.stop(),
    });
  }, 300_000);
  afterAll(() => tearDown(scene));

  noRunLost(() => scene);
});

describe('Redis Cluster: the master of the operator slot crashes mid-run', () => {
  let scene: Scene;
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await RedisCluster.start('redis-cluster-faults');
    scene = await setUpAndFailOver('faults-redis-cluster', {
      redisUrl: `redis://:${encodeURIComponent(cluster.password)}@cluster-nodes.invalid:6379`,
      env: { REDIS_CLUSTER_NODES: cluster.addresses.join(',') },
      crash: async (prefix) => (await cluster.crashMasterOf(`{${prefix}}`)).failoverMs,
      stop: () => cluster.stop(),
    });
  }, 300_000);
  afterAll(() => tearDown(scene));

  noRunLost(() => scene);

  it('keeps every key of the operator under the hash tag {prefix}, so each sits in one slot', async () => {
    const prefix = scene.world.prefix;
    const tagged = await cluster.keys(`{${prefix}}:*`);
    expect(tagged.some((key) => key.startsWith(`{${prefix}}:chamvi-agent:`))).toBe(true);
    expect(await cluster.keys(`${prefix}:*`)).toEqual([]);
  });
});
