// Security #11.1 against real redis-servers started here on loopback: the operator's Redis
// connection (workers/redis-connection.ts, what agent-runtime.ts connects with) authenticates
// with REDIS_PASSWORD against a server with requirepass, and speaks TLS to a rediss:// server
// whose certificate an openssl-made CA signed, given as redisCaFile; a client without the
// password, or without the CA, is refused.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { checkRedisCredentials, redisConnection } from '../../operator/src/workers/redis-connection.ts';
import { freePorts } from '../support/control-plane/free-port.ts';

const PASSWORD = 'test-only-password-5f2c';
let dir: string;
let server: ChildProcess;
let plainPort: number;
let tlsPort: number;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A CA, and a server certificate for 127.0.0.1 signed by it. */
function makeCertificates(): void {
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=chamvi test CA',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
  );
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    'server.ext',
    '-out',
    'server.crt',
  );
}

async function connected(url: string, options: RedisOptions): Promise<Redis> {
  const client = new Redis(url, {
    ...options,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 3_000,
  });
  // ioredis rejects connect() with "Connection is closed"; the cause comes as an error event.
  let cause: unknown;
  client.on('error', (error) => (cause ??= error));
  try {
    await client.connect();
    return client;
  } catch (error) {
    client.disconnect();
    throw cause ?? error;
  }
}

/** The client the operator makes from this config (the options agent-runtime.ts uses). */
async function operatorClient(file: object, env: NodeJS.ProcessEnv = {}): Promise<Redis> {
  const config = loadOperatorConfig(file, env);
  checkRedisCredentials(config);
  const { url, options } = redisConnection(config);
  return connected(url, options);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chamvi-redis-credentials-'));
  makeCertificates();
  [plainPort, tlsPort] = (await freePorts(2)) as [number, number];
  const config = [
    `port ${plainPort}`,
    `tls-port ${tlsPort}`,
    'bind 127.0.0.1',
    `tls-cert-file ${join(dir, 'server.crt')}`,
    `tls-key-file ${join(dir, 'server.key')}`,
    `tls-ca-cert-file ${join(dir, 'ca.crt')}`,
    // The operator authenticates with its password; client certificates are not asked for.
    'tls-auth-clients no',
    `requirepass "${PASSWORD}"`,
    'save ""',
    'appendonly no',
    `dir ${dir}`,
    '',
  ].join('\n');
  // The config on stdin (`redis-server -`), as run --local does: the password is in no argv.
  server = spawn('redis-server', ['-'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  server.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  server.stdin!.end(config);
  const deadline = Date.now() + 15_000;
  while (!output.includes('Ready to accept connections')) {
    if (server.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server with TLS did not start: ${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
});

afterAll(() => {
  server?.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('security #11.1 the operator connects to Redis with credentials', () => {
  it('authenticates with REDIS_PASSWORD against a redis-server with requirepass; without it the server refuses', async () => {
    const client = await operatorClient({ redisUrl: `redis://127.0.0.1:${plainPort}` }, { REDIS_PASSWORD: PASSWORD });
    expect(await client.set('chamvi:probe', 'ok')).toBe('OK');
    client.disconnect();
    // The same URL without the password passes only with allowInsecureRedis, and Redis still says no.
    expect(() => checkRedisCredentials(loadOperatorConfig({ redisUrl: `redis://127.0.0.1:${plainPort}` }, {}))).toThrow(
      /allowInsecureRedis/,
    );
    await expect(
      operatorClient({ redisUrl: `redis://127.0.0.1:${plainPort}`, allowInsecureRedis: true }).then((anonymous) =>
        anonymous.get('chamvi:probe'),
      ),
    ).rejects.toThrow(/NOAUTH/);
    await expect(operatorClient({ redisUrl: `redis://:wrong@127.0.0.1:${plainPort}` })).rejects.toThrow(
      /WRONGPASS|invalid username-password/,
    );
  });

  it('speaks TLS to rediss:// with the CA of redisCaFile, and refuses a server its CAs do not vouch for', async () => {
    const client = await operatorClient(
      { redisUrl: `rediss://127.0.0.1:${tlsPort}`, redisCaFile: join(dir, 'ca.crt') },
      { REDIS_PASSWORD: PASSWORD },
    );
    expect(await client.ping()).toBe('PONG');
    expect((await client.info('server')).match(/tcp_port:(\d+)/)?.[1]).toBe(String(plainPort));
    client.disconnect();
    // The system CAs do not know the test CA: the handshake fails before any password is sent.
    await expect(operatorClient({ redisUrl: `rediss://:${PASSWORD}@127.0.0.1:${tlsPort}` })).rejects.toThrow(
      /self[- ]signed|unable to verify|certificate/i,
    );
    // Plain Redis protocol on the TLS port gets nowhere either.
    await expect(operatorClient({ redisUrl: `redis://:${PASSWORD}@127.0.0.1:${tlsPort}` }).then((each) => each.ping())).rejects.toThrow();
  });
});
