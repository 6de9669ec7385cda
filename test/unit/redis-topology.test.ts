// #17.2: which shape of Redis the operator connects to (workers/redis-connection.ts), decided
// from the config alone: one server, a master behind Sentinels, or a Redis Cluster; the
// credentials and TLS the same way for all three; the hash-tagged prefix a Cluster needs.
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { parseRedisAddress, redisKeyPrefix, redisTopology } from '../../operator/src/workers/redis-connection.ts';

const config = (file: object, env: NodeJS.ProcessEnv = {}) => loadOperatorConfig(file, env);
const ca = () => Buffer.from('CA');

describe('Redis topology (#17.2)', () => {
  it.each([
    ['one server', {}, {}, 'standalone'],
    ['Sentinels from the file', { redisSentinels: ['s1:26379', 's2:26379'] }, {}, 'sentinel'],
    ['Sentinels from env', {}, { REDIS_SENTINELS: 's1:26379, s2:26379' }, 'sentinel'],
    ['Cluster nodes from the file', { redisClusterNodes: ['n1:7000'] }, {}, 'cluster'],
    ['Cluster nodes from env', {}, { REDIS_CLUSTER_NODES: 'n1:7000,n2:7001' }, 'cluster'],
  ] as const)('%s: %s', (_, file, env, mode) => {
    expect(redisTopology(config(file, env)).mode).toBe(mode);
  });

  it('asks the Sentinels for the named master, with the password of REDIS_PASSWORD and the Sentinels their own', () => {
    const topology = redisTopology(
      config(
        { redisUrl: 'redis://redis.example:6379/2', redisSentinels: ['s1:26379', '[fd00::1]:26380'], redisSentinelMaster: 'runs' },
        { REDIS_PASSWORD: 'p@ss', REDIS_SENTINEL_PASSWORD: 'sent' },
      ),
    );
    expect(topology).toEqual({
      mode: 'sentinel',
      options: {
        password: 'p@ss',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 'fd00::1', port: 26380 },
        ],
        name: 'runs',
        sentinelPassword: 'sent',
        db: 2,
      },
    });
  });

  it('gives a Cluster the credentials and TLS of redisUrl on every node connection', () => {
    const topology = redisTopology(
      config({ redisUrl: 'rediss://app:pw@ignored:6379', redisClusterNodes: ['n1:7000', 'n2:7001'], redisCaFile: '/ca.pem' }),
      ca,
    );
    expect(topology).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
      ],
      options: { redisOptions: { username: 'app', password: 'pw', tls: { ca: Buffer.from('CA') } } },
    });
  });

  it('refuses both shapes at once, a Cluster with a database, and an entry that is not host:port, naming the key', () => {
    expect(() => redisTopology(config({ redisSentinels: ['s:1'], redisClusterNodes: ['n:2'] }))).toThrow(
      /redisSentinels and redisClusterNodes: set one/,
    );
    expect(() => redisTopology(config({ redisUrl: 'redis://:pw@x:6379/3', redisClusterNodes: ['n:2'] }))).toThrow(
      /Cluster has only database 0/,
    );
    for (const entry of ['n1', 'n1:', 'n1:70000', 'n1:0', 'fd00::1:7000', 'a b:1'])
      expect(() => parseRedisAddress(entry, 'redisClusterNodes'), entry).toThrow(/config key redisClusterNodes: .* is not host:port/);
  });

  it('hash-tags the key prefix in a Cluster only: every key of a BullMQ queue must be in one slot', () => {
    expect(redisKeyPrefix('chamvi', { mode: 'cluster' })).toBe('{chamvi}');
    expect(redisKeyPrefix('chamvi', { mode: 'sentinel' })).toBe('chamvi');
    expect(redisKeyPrefix('chamvi', { mode: 'standalone' })).toBe('chamvi');
  });
});
