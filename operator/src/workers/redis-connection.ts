// Security #11.1: how every replica connects to Redis, and the start-up refusal of a Redis
// without credentials. Redis holds every run's state and queue, so whoever reaches an open
// Redis can stall, stop or (without the state seal) steer runs; a password is the default
// (the chart generates one for its bundled Redis), and an open one needs the admin to say
// so with allowInsecureRedis. rediss:// connects with TLS (the system CAs, or redisCaFile).
//
// Three shapes of Redis (#17.2): one server (redisUrl), a master watched by Sentinels
// (redisSentinels: ioredis asks them for the master and follows a failover), or a Redis
// Cluster (redisClusterNodes: ioredis follows MOVED/ASK and a promoted replica). In the last
// two, redisUrl gives only the scheme (rediss: is TLS) and the credentials.
import { readFileSync } from 'node:fs';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ConfigError, type OperatorConfig } from '../config/operator-config.ts';

export type RedisSettings = Pick<
  OperatorConfig,
  | 'redisUrl'
  | 'redisPassword'
  | 'redisCaFile'
  | 'allowInsecureRedis'
  | 'redisSentinels'
  | 'redisSentinelMaster'
  | 'redisSentinelPassword'
  | 'redisClusterNodes'
>;

/** A connection to any of the three shapes: BullMQ and the run-state store take either. */
export type RedisClient = Redis | Cluster;

export interface RedisAddress {
  host: string;
  port: number;
}

/** How to connect, decided from the config alone (no I/O but reading redisCaFile). */
export type RedisTopology =
  | { mode: 'standalone'; url: string; options: RedisOptions }
  | { mode: 'sentinel'; options: RedisOptions }
  | { mode: 'cluster'; nodes: RedisAddress[]; options: ClusterOptions };

function parse(url: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new ConfigError('config key redisUrl: not a URL; use redis://[:PASSWORD@]HOST[:PORT][/DB] or rediss://...');
  }
}

/** True when the connection authenticates: a password in the URL or in redisPassword. */
export function redisHasCredentials(settings: Pick<RedisSettings, 'redisUrl' | 'redisPassword'>): boolean {
  return parse(settings.redisUrl).password !== '' || settings.redisPassword !== undefined;
}

/** Throws ConfigError, naming the key to set, for a Redis without credentials that the admin did not allow. */
export function checkRedisCredentials(settings: Pick<RedisSettings, 'redisUrl' | 'redisPassword' | 'allowInsecureRedis'>): void {
  if (redisHasCredentials(settings) || settings.allowInsecureRedis) return;
  throw new ConfigError(
    'config key redisUrl: the Redis URL has no password and redisPassword (env REDIS_PASSWORD) is not set. ' +
      'Give Redis a password (requirepass) and set REDIS_PASSWORD from a Secret, or put it in the URL ' +
      '(redis://:PASSWORD@host:6379, from a Secret); to run with an open Redis anyway, set allowInsecureRedis: true ' +
      '(env CHAMVI_ALLOW_INSECURE_REDIS=true), knowing that anyone who reaches it can stop or stall every run.',
  );
}

/** The URL and ioredis options of a connection: the password added when the URL has none, TLS for rediss://. */
export function redisConnection(
  settings: Pick<RedisSettings, 'redisUrl' | 'redisPassword' | 'redisCaFile'>,
  readFile: (path: string) => Buffer = readFileSync,
): { url: string; options: RedisOptions } {
  const url = parse(settings.redisUrl);
  // ioredis takes the URL's credentials over the options' (a URL with a user and no
  // password would even send an empty one), so the password goes into the URL.
  if (url.password === '' && settings.redisPassword !== undefined) url.password = encodeURIComponent(settings.redisPassword);
  const options: RedisOptions = {};
  if (url.protocol === 'rediss:') {
    options.tls = settings.redisCaFile ? { ca: readCa(settings.redisCaFile, readFile) } : {};
  } else if (settings.redisCaFile) {
    throw new ConfigError(
      'config key redisCaFile: set, but redisUrl is not rediss://; use a rediss:// URL to connect with TLS, or remove redisCaFile',
    );
  }
  return { url: url.toString(), options };
}

function readCa(path: string, readFile: (path: string) => Buffer): Buffer {
  try {
    return readFile(path);
  } catch (error) {
    throw new ConfigError(`config key redisCaFile: cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** "host:port" (or "[v6]:port") as the config lists it. */
export function parseRedisAddress(entry: string, key: string): RedisAddress {
  const match = /^(?:\[([0-9a-fA-F:]+)\]|([^:\s]+)):(\d{1,5})$/.exec(entry.trim());
  const port = match ? Number(match[3]) : 0;
  if (!match || port < 1 || port > 65535) throw new ConfigError(`config key ${key}: ${JSON.stringify(entry)} is not host:port`);
  return { host: match[1] ?? match[2]!, port };
}

/**
 * The shape to connect to. Sentinel and Cluster take the password (and TLS) the way a single
 * server does, from redisUrl's credentials or redisPassword, so the credential checks above
 * hold for all three.
 */
export function redisTopology(settings: RedisSettings, readFile: (path: string) => Buffer = readFileSync): RedisTopology {
  const sentinels = settings.redisSentinels ?? [];
  const clusterNodes = settings.redisClusterNodes ?? [];
  if (sentinels.length > 0 && clusterNodes.length > 0)
    throw new ConfigError('config keys redisSentinels and redisClusterNodes: set one of them (Sentinel or Cluster), not both');
  const single = redisConnection(settings, readFile);
  if (sentinels.length === 0 && clusterNodes.length === 0) return { mode: 'standalone', ...single };
  const url = new URL(single.url);
  if (url.pathname !== '' && url.pathname !== '/' && url.pathname !== '/0' && clusterNodes.length > 0)
    throw new ConfigError('config key redisUrl: a Redis Cluster has only database 0; remove the /DB from the URL');
  const credentials: RedisOptions = {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(single.options.tls ? { tls: single.options.tls } : {}),
  };
  if (sentinels.length > 0) {
    const db = Number(url.pathname.slice(1) || 0);
    return {
      mode: 'sentinel',
      options: {
        ...credentials,
        sentinels: sentinels.map((entry) => parseRedisAddress(entry, 'redisSentinels')),
        name: settings.redisSentinelMaster,
        ...(settings.redisSentinelPassword ? { sentinelPassword: settings.redisSentinelPassword } : {}),
        ...(single.options.tls ? { enableTLSForSentinelMode: true, sentinelTLS: single.options.tls } : {}),
        ...(db ? { db } : {}),
      },
    };
  }
  return {
    mode: 'cluster',
    nodes: clusterNodes.map((entry) => parseRedisAddress(entry, 'redisClusterNodes')),
    options: { redisOptions: credentials },
  };
}

/**
 * The key prefix in Redis. In a Cluster every key of a BullMQ queue must hash to one slot
 * (its Lua scripts touch several keys at once), so the prefix becomes a hash tag: {chamvi}.
 */
export function redisKeyPrefix(prefix: string, topology: Pick<RedisTopology, 'mode'>): string {
  return topology.mode === 'cluster' ? `{${prefix}}` : prefix;
}

/** Opens a connection of that shape; `options` (e.g. maxRetriesPerRequest) apply to every server connection. */
export function connectRedis(topology: RedisTopology, options: RedisOptions = {}): RedisClient {
  switch (topology.mode) {
    case 'standalone':
      return new Redis(topology.url, { ...topology.options, ...options });
    case 'sentinel':
      return new Redis({ ...topology.options, ...options });
    case 'cluster':
      return new Cluster(topology.nodes, { ...topology.options, redisOptions: { ...topology.options.redisOptions, ...options } });
  }
}
