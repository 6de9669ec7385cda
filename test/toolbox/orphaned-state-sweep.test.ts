// The leader's sweep of run states whose run is gone (controller/orphaned-state-sweep.ts) on a
// real redis-server, with the real state store and the real stop (workers/agent-queue.ts): a run
// deleted while no operator ran kept its state (no TTL), its queued jobs and its bytes in its
// namespace's tally for good. Also the store's listing (RunStateStore.uids) on a real
// three-master Redis Cluster, where SCAN walks one server only.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { OrphanedStateSweep } from '../../operator/src/controller/orphaned-state-sweep.ts';
import { AgentQueue } from '../../operator/src/workers/agent-queue.ts';
import { jobId, QUEUE_NAME, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { RunJobIndex } from '../../operator/src/workers/run-job-index.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { freePorts } from '../support/control-plane/free-port.ts';
import { MemoryCache } from '../support/memory-run-world.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();
const GRACE = 60_000;

const ref = (uid: string, namespace: string) => ({ uid, namespace, name: `run-${uid}` });

describe('the sweep on a real Redis', () => {
  const PREFIX = 'orphans';
  let queue: Queue<AgentJobData, void, AgentJobName>;
  afterAll(async () => {
    await queue?.close();
  });

  it("stops the run of a state left with no run once two sweeps the grace apart found it: its state, jobs and tally entry go; a live run's state stays", async () => {
    const redis = server.redis;
    const seal = RunStateSeal.generated();
    const states = new RunStateStore(redis, PREFIX, seal);
    queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: redis, prefix: PREFIX });
    const sandboxes = new SandboxPool(() => {
      throw new Error('no sandbox is opened by stop()');
    });
    const agent = new AgentQueue(queue, states, sandboxes, seal, redis, new RunJobIndex(redis, PREFIX));

    // A run deleted while no operator ran, parked after its first step: its state, its next job, its bytes in the tally.
    const gone = ref('uid-gone', 'team-a');
    await states.create(startingState(gone, 0));
    await agent.step(gone, 1);
    // A run that lives (in the cache), of the same namespace.
    const live = ref('uid-live', 'team-a');
    await states.create(startingState(live, 0));
    // A state this operator cannot read (another stateKey), and another install's state (another prefix): neither is this sweep's.
    const foreign = ref('uid-foreign', 'team-a');
    await new RunStateStore(redis, PREFIX, RunStateSeal.generated()).create(startingState(foreign, 0));
    const otherInstall = ref('uid-other-install', 'team-a');
    await new RunStateStore(redis, `${PREFIX}-2`, seal).create(startingState(otherInstall, 0));
    const tally = `${PREFIX}:state-bytes:team-a`;
    // Control: what the gone run left is there.
    expect(await redis.exists(`${PREFIX}:run:${gone.uid}`)).toBe(1);
    expect(await redis.hexists(tally, gone.uid)).toBe(1);
    expect(await queue.getJobState(jobId.step(gone.uid, 1))).toBe('waiting');

    let now = 1_000_000;
    const sweep = new OrphanedStateSweep({
      states,
      runs: new MemoryCache<CodingRun>([codingRunFixture({ metadata: { uid: live.uid, namespace: live.namespace, name: live.name } })]),
      agent,
      watchNamespaces: [],
      logger: { info: () => undefined, warn: () => undefined },
      now: () => now,
      graceMs: GRACE,
    });
    expect(await sweep.sweep(), 'first seen: only noted').toEqual([]);
    now += GRACE / 2;
    expect(await sweep.sweep(), 'within the grace').toEqual([]);
    expect(await redis.exists(`${PREFIX}:run:${gone.uid}`)).toBe(1);
    now += GRACE / 2;
    expect(await sweep.sweep()).toEqual([gone.uid]);

    expect(await redis.exists(`${PREFIX}:run:${gone.uid}`), 'its state').toBe(0);
    expect(await redis.hexists(tally, gone.uid), 'its tally entry').toBe(0);
    expect(await queue.getJobState(jobId.step(gone.uid, 1)), 'its queued job').toBe('unknown');
    expect(await redis.exists(`${PREFIX}:run:${live.uid}`), "the live run's state").toBe(1);
    expect(await redis.hexists(tally, live.uid), "the live run's tally entry").toBe(1);
    expect(await redis.exists(`${PREFIX}:run:${foreign.uid}`), 'the unreadable state').toBe(1);
    expect(await redis.exists(`${PREFIX}-2:run:${otherInstall.uid}`), "the other prefix's state").toBe(1);
  });

  it('lists the states of its own prefix only, a prefix with glob characters taken as it is', async () => {
    const redis = server.redis;
    const seal = RunStateSeal.generated();
    const globbed = new RunStateStore(redis, 'glob?[ab]', seal);
    await globbed.create(startingState(ref('uid-globbed', 'team'), 0));
    // What `glob?[ab]:run:*` unescaped would match, too.
    await redis.set('globza:run:uid-not-mine', 'x');
    // Another key under the prefix that is no state.
    await redis.set('glob?[ab]:run:uid-x:extra', 'x');
    expect(await globbed.uids()).toEqual(['uid-globbed']);
  });

  it('lists every state when there are more than one SCAN call returns', async () => {
    const redis = server.redis;
    const states = new RunStateStore(redis, 'many', RunStateSeal.generated());
    const expected = Array.from({ length: 250 }, (_, index) => `uid-${String(index).padStart(3, '0')}`);
    const writes = redis.pipeline();
    for (const uid of expected) writes.set(`many:run:${uid}`, 'x');
    await writes.exec();
    expect((await states.uids(10)).sort()).toEqual(expected);
  });
});

/** Three redis-server masters in one Cluster, no replicas, no password: the store's listing is what is tested. */
async function startCluster(): Promise<{ ports: number[]; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'orphan-sweep-cluster-'));
  const ports = await freePorts(3);
  const children: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    ),
  );
  const stop = async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  const ask = async (port: number, ...command: [string, ...(string | number)[]]) => {
    const connection = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    connection.on('error', () => undefined);
    try {
      await connection.connect();
      return await connection.call(...command);
    } catch {
      return undefined;
    } finally {
      connection.disconnect();
    }
  };
  const until = async (what: string, probe: () => Promise<boolean>) => {
    for (let tries = 0; !(await probe()); tries++) {
      if (tries > 300) throw new Error(`cluster: ${what} within 30 s`);
      await sleep(100);
    }
  };
  try {
    for (const port of ports) await until(`${port} to answer PING`, async () => (await ask(port, 'PING')) === 'PONG');
    const ranges = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ] as const;
    for (const [index, [first, last]] of ranges.entries()) await ask(ports[index]!, 'CLUSTER', 'ADDSLOTSRANGE', first, last);
    for (const port of ports.slice(1)) await ask(ports[0]!, 'CLUSTER', 'MEET', '127.0.0.1', port);
    for (const port of ports)
      await until('cluster_state:ok', async () => String(await ask(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'));
    return { ports, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

describe('the listing on a Redis Cluster', () => {
  let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
  let client: Cluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster();
    client = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0]! }]);
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  it("finds the states on whichever master holds its prefix's slot (SCAN walks one server only): every master is scanned", async () => {
    // One hash-tagged prefix per master, as redisKeyPrefix makes them in a Cluster ({chamvi}).
    const masterOfSlot = (slot: number) => (slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2);
    const prefixes = new Map<number, string>();
    for (let index = 0; prefixes.size < 3; index++) {
      const prefix = `{sweep-${index}}`;
      const master = masterOfSlot(Number(await client!.cluster('KEYSLOT', prefix)));
      if (!prefixes.has(master)) prefixes.set(master, prefix);
    }
    const seal = RunStateSeal.generated();
    for (const prefix of prefixes.values()) {
      const states = new RunStateStore(client!, prefix, seal);
      await states.create(startingState(ref(`uid-of-${prefix}`, 'team'), 0));
    }
    for (const prefix of prefixes.values()) {
      const states = new RunStateStore(client!, prefix, seal);
      expect(await states.uids(), prefix).toEqual([`uid-of-${prefix}`]);
      expect(await states.ownerOf(`uid-of-${prefix}`)).toEqual({ ref: ref(`uid-of-${prefix}`, 'team') });
    }
  });
});
