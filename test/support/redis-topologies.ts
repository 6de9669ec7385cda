// Real Redis beyond one server, for the faults tier (#17.2): a master with a replica watched by
// three Sentinels, and a six-node Redis Cluster (three masters, each with a replica). Every
// server has a password, as the chart's does. Both are made of plain redis-server processes,
// recorded in the control plane's state dir (so its teardown stops them if a test fails
// half-way), and both can lose a master to SIGKILL and wait for the failover.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { redisServerPath } from './control-plane/binaries.ts';
import { freePorts } from './control-plane/free-port.ts';
import { logTail, startManagedProcess, type ManagedProcess } from './control-plane/managed-process.ts';
import { writeRedisAuth } from './control-plane/redis-auth.ts';

const stateDir = () => inject('controlPlaneStateDir');
/** How long a master may be silent before it is judged down: short, so a test's failover takes seconds. */
const DOWN_AFTER_MS = 1_000;

interface Server {
  port: number;
  process: ManagedProcess;
}

function client(port: number, password: string): Redis {
  const connection = new Redis({
    host: '127.0.0.1',
    port,
    password,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  // A server not up yet (or killed on purpose): ask() answers undefined, no need to shout.
  connection.on('error', () => undefined);
  return connection;
}

/** Runs one command on a server with a short-lived connection; undefined when it does not answer. */
async function ask(port: number, password: string, ...command: [string, ...(string | number)[]]): Promise<unknown> {
  const connection = client(port, password);
  try {
    await connection.connect();
    return await connection.call(...command);
  } catch {
    return undefined;
  } finally {
    connection.disconnect();
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`redis topology: ${what} within ${timeoutMs} ms`);
    await sleep(100);
  }
}

function startServer(name: string, port: number, dir: string, authFile: string, args: string[]): Server {
  mkdirSync(dir, { recursive: true });
  const managed = startManagedProcess({
    name,
    stateDir: stateDir(),
    command: redisServerPath(),
    args: [authFile, '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...args],
  });
  return { port, process: managed };
}

async function answering(server: Server, password: string, name: string): Promise<void> {
  await until(`${name} to answer PING`, async () => {
    if (server.process.exited()) throw new Error(`${name} exited: ${logTail(server.process.logPath)}`);
    return (await ask(server.port, password, 'PING')) === 'PONG' ? true : undefined;
  });
}

/** "role:master" etc. from INFO replication, as a map. */
async function replicationInfo(port: number, password: string): Promise<Map<string, string> | undefined> {
  const text = await ask(port, password, 'INFO', 'replication');
  if (typeof text !== 'string') return undefined;
  return new Map(text.split('\r\n').flatMap((line) => (line.includes(':') ? [line.split(':', 2) as [string, string]] : [])));
}

/** Waits until the replica has every write of its master: a crash then loses nothing that was acknowledged. */
async function replicaCaughtUp(master: number, replica: number, password: string): Promise<void> {
  await until(`the replica on ${replica} to catch up with ${master}`, async () => {
    const [m, r] = [await replicationInfo(master, password), await replicationInfo(replica, password)];
    const offset = m?.get('master_repl_offset');
    return offset !== undefined && r?.get('master_link_status') === 'up' && r.get('slave_repl_offset') === offset ? true : undefined;
  });
}

/** SIGKILL: a crash, no chance to hand anything over. */
function kill(server: Server): void {
  try {
    process.kill(-server.process.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** A master and a replica, watched by three Sentinels (quorum 2), all with passwords. */
export class SentinelSet {
  readonly masterName = 'chamvi-master';

  private constructor(
    readonly password: string,
    readonly sentinelPassword: string,
    private master: Server,
    private replica: Server,
    private readonly sentinels: Server[],
  ) {}

  static async start(name: string): Promise<SentinelSet> {
    const root = join(stateDir(), name);
    mkdirSync(root, { recursive: true });
    const [masterPort, replicaPort, ...sentinelPorts] = (await freePorts(5)) as [number, number, number, number, number];
    const auth = writeRedisAuth(root);
    mkdirSync(join(root, 'sentinel-auth'), { recursive: true });
    const sentinelAuth = writeRedisAuth(join(root, 'sentinel-auth'));
    // Both data servers may become master: each knows the password to replicate the other.
    const data = ['--masterauth', auth.password];
    const master = startServer(`${name}-a`, masterPort, join(root, 'a'), auth.configFile, data);
    const replica = startServer(`${name}-b`, replicaPort, join(root, 'b'), auth.configFile, [
      ...data,
      '--replicaof',
      '127.0.0.1',
      String(masterPort),
    ]);
    await answering(master, auth.password, `${name}-a`);
    await answering(replica, auth.password, `${name}-b`);
    await replicaCaughtUp(masterPort, replicaPort, auth.password);
    const sentinels = sentinelPorts.map((port, index) => {
      const dir = join(root, `sentinel-${index}`);
      mkdirSync(dir, { recursive: true });
      // Sentinel rewrites its config file as it learns: one writable file each.
      const configFile = join(dir, 'sentinel.conf');
      writeFileSync(
        configFile,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `requirepass "${sentinelAuth.password}"`,
          `sentinel monitor chamvi-master 127.0.0.1 ${masterPort} 2`,
          `sentinel auth-pass chamvi-master "${auth.password}"`,
          `sentinel sentinel-pass "${sentinelAuth.password}"`,
          `sentinel down-after-milliseconds chamvi-master ${DOWN_AFTER_MS}`,
          'sentinel failover-timeout chamvi-master 5000',
          '',
        ].join('\n'),
        { mode: 0o600 },
      );
      const managed = startManagedProcess({
        name: `${name}-sentinel-${index}`,
        stateDir: stateDir(),
        command: redisServerPath(),
        args: [configFile, '--sentinel'],
        cwd: dir,
      });
      return { port, process: managed };
    });
    for (const [index, sentinel] of sentinels.entries()) await answering(sentinel, sentinelAuth.password, `${name}-sentinel-${index}`);
    const set = new SentinelSet(auth.password, sentinelAuth.password, master, replica, sentinels);
    // Every Sentinel must know the replica (and the others) before a failover can elect it.
    await until('the Sentinels to see the replica and each other', async () => {
      for (const sentinel of sentinels) {
        const replicas = await ask(sentinel.port, sentinelAuth.password, 'SENTINEL', 'REPLICAS', 'chamvi-master');
        const peers = await ask(sentinel.port, sentinelAuth.password, 'SENTINEL', 'SENTINELS', 'chamvi-master');
        if (!Array.isArray(replicas) || replicas.length < 1 || !Array.isArray(peers) || peers.length < 2) return undefined;
      }
      return true;
    });
    return set;
  }

  /** host:port of each Sentinel, as config redisSentinels takes them. */
  get addresses(): string[] {
    return this.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`);
  }

  /** The port the Sentinels name as master now. */
  async masterPort(): Promise<number | undefined> {
    const answer = await ask(this.sentinels[0]!.port, this.sentinelPassword, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.masterName);
    return Array.isArray(answer) ? Number(answer[1]) : undefined;
  }

  /**
   * SIGKILLs the master once its replica has every write, and waits until the Sentinels have
   * promoted the replica and it accepts writes. Returns how long the master was missing.
   */
  async crashMaster(): Promise<{ failoverMs: number }> {
    await replicaCaughtUp(this.master.port, this.replica.port, this.password);
    const started = Date.now();
    kill(this.master);
    await until(
      'the Sentinels to promote the replica',
      async () => ((await this.masterPort()) === this.replica.port ? true : undefined),
      60_000,
    );
    await until('the new master to accept writes', async () =>
      (await replicationInfo(this.replica.port, this.password))?.get('role') === 'master' ? true : undefined,
    );
    [this.master, this.replica] = [this.replica, this.master];
    return { failoverMs: Date.now() - started };
  }

  stop(): void {
    for (const server of [this.master, this.replica, ...this.sentinels]) kill(server);
  }
}

/** Six cluster-enabled servers: three masters sharing the 16384 slots, each with a replica. */
export class RedisCluster {
  private constructor(
    readonly password: string,
    private readonly servers: Server[],
  ) {}

  static async start(name: string): Promise<RedisCluster> {
    const root = join(stateDir(), name);
    mkdirSync(root, { recursive: true });
    const ports = await freePorts(6);
    const auth = writeRedisAuth(root);
    const servers = ports.map((port, index) =>
      startServer(`${name}-${index}`, port, join(root, String(index)), auth.configFile, [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(root, String(index), 'nodes.conf'),
        '--cluster-node-timeout',
        String(DOWN_AFTER_MS),
        '--masterauth',
        auth.password,
      ]),
    );
    for (const [index, server] of servers.entries()) await answering(server, auth.password, `${name}-${index}`);
    const { password } = auth;
    // What `redis-cli --cluster create` does, in commands: slots to the masters, MEET, REPLICATE.
    const ranges = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ] as const;
    for (const [index, [first, last]] of ranges.entries())
      await ask(servers[index]!.port, password, 'CLUSTER', 'ADDSLOTSRANGE', first, last);
    for (const server of servers.slice(1)) await ask(servers[0]!.port, password, 'CLUSTER', 'MEET', '127.0.0.1', server.port);
    const ids = await Promise.all(servers.map(async (server) => String(await ask(server.port, password, 'CLUSTER', 'MYID'))));
    for (const server of servers) {
      await until('every node to know the other five', async () => {
        const nodes = await ask(server.port, password, 'CLUSTER', 'NODES');
        return typeof nodes === 'string' && nodes.trim().split('\n').length === 6 && !nodes.includes('handshake') ? true : undefined;
      });
    }
    for (let index = 3; index < 6; index++) {
      const master = ids[index - 3]!;
      await until(`node ${index} to replicate ${master}`, async () =>
        (await ask(servers[index]!.port, password, 'CLUSTER', 'REPLICATE', master)) === 'OK' ? true : undefined,
      );
    }
    for (const server of servers) {
      await until('cluster_state:ok on every node', async () => {
        const info = await ask(server.port, password, 'CLUSTER', 'INFO');
        return typeof info === 'string' && info.includes('cluster_state:ok') ? true : undefined;
      });
    }
    for (let index = 3; index < 6; index++) await replicaCaughtUp(servers[index - 3]!.port, servers[index]!.port, password);
    return new RedisCluster(password, servers);
  }

  /** Some nodes as host:port, as config redisClusterNodes takes them (one is enough: the rest are discovered). */
  get addresses(): string[] {
    return this.servers.slice(0, 2).map((server) => `127.0.0.1:${server.port}`);
  }

  /** The server that is master of the slot of `key` now. */
  private async masterOf(key: string): Promise<Server> {
    const slot = Number(await ask(this.servers[0]!.port, this.password, 'CLUSTER', 'KEYSLOT', key));
    const live = this.servers.find((server) => !server.process.exited());
    const shards = (await ask(live!.port, this.password, 'CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const port = shards.find(([first, last]) => slot >= first && slot <= last)?.[2][1];
    const server = this.servers.find((candidate) => candidate.port === port);
    if (!server) throw new Error(`no master found for slot ${slot}`);
    return server;
  }

  /**
   * SIGKILLs the master of `key`'s slot once its replica has every write, and waits until the
   * replica has taken the slot over and the cluster is whole again.
   */
  async crashMasterOf(key: string): Promise<{ failoverMs: number; oldPort: number; newPort: number }> {
    const master = await this.masterOf(key);
    const replicaOf = async (server: Server) => (await replicationInfo(server.port, this.password))?.get('master_port');
    let replica: Server | undefined;
    for (const server of this.servers) if ((await replicaOf(server)) === String(master.port)) replica = server;
    if (!replica) throw new Error(`the master on ${master.port} has no replica`);
    await replicaCaughtUp(master.port, replica.port, this.password);
    const started = Date.now();
    kill(master);
    await until(
      'the replica to take the slot over',
      async () => ((await replicationInfo(replica.port, this.password))?.get('role') === 'master' ? true : undefined),
      60_000,
    );
    await until('cluster_state:ok again', async () => {
      const info = await ask(replica.port, this.password, 'CLUSTER', 'INFO');
      return typeof info === 'string' && info.includes('cluster_state:ok') ? true : undefined;
    });
    return { failoverMs: Date.now() - started, oldPort: master.port, newPort: replica.port };
  }

  /** Every key matching `pattern` on the masters (to see where the operator's keys went). */
  async keys(pattern: string): Promise<string[]> {
    const found: string[] = [];
    for (const server of this.servers) {
      if (server.process.exited()) continue;
      if ((await replicationInfo(server.port, this.password))?.get('role') !== 'master') continue;
      const keys = await ask(server.port, this.password, 'KEYS', pattern);
      if (Array.isArray(keys)) found.push(...(keys as string[]));
    }
    return found;
  }

  stop(): void {
    for (const server of this.servers) kill(server);
  }
}
