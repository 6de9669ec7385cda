// Security #11.1 in the chart: the bundled Redis has a generated password (requirepass, from a
// Secret kept across upgrades with lookup) and protected mode on; the operator gets the
// password and the state key from that Secret; an external Redis without a password renders
// a config the operator refuses unless config.allowInsecureRedis is set. The rendered Redis
// config is run by the real redis-server to show it refuses a client without the password.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { checkRedisCredentials, redisTopology } from '../../operator/src/workers/redis-connection.ts';
import { freePorts } from '../support/control-plane/free-port.ts';
import { redisPing } from '../support/control-plane/readiness.ts';
import { createNamespace, deleteNamespace, kubectl } from '../support/cluster.ts';
import { chartDir, helm } from '../support/helm.ts';
import { runProcess } from '../support/run-process.ts';

const RELEASE = 'redis-auth';
const NAMESPACE = 'chamvi-chart-redis-auth';
const SECRET = `${RELEASE}-chamvi-operator-secrets`;

interface Manifest {
  kind: string;
  metadata: { name: string };
  [key: string]: any;
}

async function render(...args: string[]): Promise<Manifest[]> {
  const result = await helm([
    'template',
    RELEASE,
    chartDir,
    '--namespace',
    NAMESPACE,
    '--set',
    'config.allowRepo={https://github.com/acme/*}',
    ...args,
  ]);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
}

const find = (docs: Manifest[], kind: string, suffix = '') => docs.find((doc) => doc.kind === kind && doc.metadata.name.endsWith(suffix));
const decoded = (secret: Manifest) =>
  Object.fromEntries(
    Object.entries(secret.data as Record<string, string>).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
  );
const operatorEnv = (docs: Manifest[]) =>
  find(docs, 'Deployment')!.spec.template.spec.containers[0].env as Array<{ name: string; value?: string; valueFrom?: any }>;
/** The operator's config as it starts: the ConfigMap's file, and env values taken from `secrets`. */
function operatorConfig(docs: Manifest[], secrets: Record<string, Record<string, string>>) {
  const env: Record<string, string> = {};
  for (const variable of operatorEnv(docs)) {
    const ref = variable.valueFrom?.secretKeyRef;
    if (ref) env[variable.name] = secrets[ref.name]?.[ref.key] ?? '';
  }
  return loadOperatorConfig(parseYaml(find(docs, 'ConfigMap', '-config')!.data['config.yaml'] as string), env);
}

const started: ChildProcess[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const child of started) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await deleteNamespace(NAMESPACE);
});

describe('security #11.1 the chart gives Redis a password and protected mode', () => {
  it('renders a generated Secret with state-key, redis-password and the redis.conf holding it', async () => {
    const secret = decoded(find(await render(), 'Secret', '-secrets')!);
    expect(secret['state-key']).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(secret['redis-password']).toMatch(/^[A-Za-z0-9]{48}$/);
    expect(secret['redis.conf']).toBe(`requirepass "${secret['redis-password']}"\n`);
  });

  it('runs the bundled Redis with that config file and protected mode on, never "--protected-mode no"', async () => {
    const docs = await render();
    const redis = find(docs, 'StatefulSet', '-redis')!.spec.template.spec;
    const container = redis.containers[0];
    expect(container.args[0]).toBe('/etc/chamvi-redis/redis.conf');
    expect(container.args.join(' ')).toContain('--protected-mode yes');
    expect(container.args.join(' ')).not.toMatch(/protected-mode no|requirepass/);
    const volume = redis.volumes.find((each: any) => each.name === 'auth');
    expect(volume.secret).toMatchObject({
      secretName: SECRET,
      items: [
        { key: 'redis.conf', path: 'redis.conf' },
        { key: 'redis-password', path: 'password' },
      ],
    });
    expect(container.volumeMounts).toContainEqual({ name: 'auth', mountPath: '/etc/chamvi-redis', readOnly: true });
    // The password reaches the probes' redis-cli through the same volume (above), never redis-server's env.
    expect(JSON.stringify(container.env ?? [])).not.toMatch(/redis-password|REDISCLI_AUTH/);
  });

  it('gives the operator REDIS_PASSWORD and CHAMVI_STATE_KEY from that Secret: the config it starts with passes the credential check', async () => {
    const docs = await render();
    const secret = decoded(find(docs, 'Secret', '-secrets')!);
    expect(operatorEnv(docs)).toEqual(
      expect.arrayContaining([
        { name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: SECRET, key: 'redis-password' } } },
        { name: 'CHAMVI_STATE_KEY', valueFrom: { secretKeyRef: { name: SECRET, key: 'state-key' } } },
      ]),
    );
    const config = operatorConfig(docs, { [SECRET]: secret });
    expect(config.redisPassword).toBe(secret['redis-password']);
    expect(config.stateKey).toBe(secret['state-key']);
    expect(() => checkRedisCredentials(config)).not.toThrow();
  });

  it('the rendered Redis (config file and flags, run by the real redis-server) refuses a client without the password', async () => {
    const docs = await render('--set', 'redis.bundled.persistence.enabled=false');
    const secret = decoded(find(docs, 'Secret', '-secrets')!);
    const args = find(docs, 'StatefulSet', '-redis')!.spec.template.spec.containers[0].args as string[];
    const dir = mkdtempSync(join(tmpdir(), 'chamvi-chart-redis-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'redis.conf'), secret['redis.conf']!, { mode: 0o600 });
    const [port] = await freePorts(1);
    // The chart's flags, with the paths of this machine; loopback only.
    const flags = args.slice(1).map((arg) => (arg === '/data' ? dir : arg));
    const child = spawn('redis-server', [join(dir, 'redis.conf'), ...flags, '--port', String(port), '--bind', '127.0.0.1'], {
      stdio: 'ignore',
    });
    started.push(child);
    const client = (password?: string) =>
      new Redis({
        port: port!,
        host: '127.0.0.1',
        ...(password ? { password } : {}),
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
    const authenticated = client(secret['redis-password']);
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await authenticated.connect();
        break;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    expect(await authenticated.ping()).toBe('PONG');
    expect(await authenticated.config('GET', 'protected-mode')).toEqual(['protected-mode', 'yes']);
    authenticated.disconnect();
    // Without the password Redis answers NOAUTH, not PONG.
    expect(await redisPing(port!)).toBe(false);
  });

  it('the rendered probes, run by a real sh and redis-cli, get PONG from that Redis with the mounted password alone', async () => {
    const docs = await render('--set', 'redis.bundled.persistence.enabled=false');
    const secret = decoded(find(docs, 'Secret', '-secrets')!);
    const redis = find(docs, 'StatefulSet', '-redis')!.spec.template.spec;
    const container = redis.containers[0];
    const dir = mkdtempSync(join(tmpdir(), 'chamvi-chart-redis-probe-'));
    dirs.push(dir);
    // The auth volume as the kubelet lays it out: each item of the Secret at its path.
    const { items } = redis.volumes.find((each: any) => each.name === 'auth').secret as { items: Array<{ key: string; path: string }> };
    for (const item of items) writeFileSync(join(dir, item.path), secret[item.key]!, { mode: 0o600 });
    const [port] = await freePorts(1);
    const args = container.args.slice(1).map((arg: string) => (arg === '/data' ? dir : arg)) as string[];
    const server = spawn('redis-server', [join(dir, 'redis.conf'), ...args, '--port', String(port), '--bind', '127.0.0.1'], {
      stdio: 'ignore',
    });
    started.push(server);
    /** A probe's command with this machine's paths, against this server, in an env without REDISCLI_AUTH. */
    const runProbe = (command: string[]) => {
      const [program, ...rest] = command.map((part) => part.replaceAll('/etc/chamvi-redis', dir));
      expect(rest.join(' ')).toContain('redis-cli ping');
      const env = { PATH: process.env.PATH! };
      return runProcess(
        program!,
        rest.map((part) => part.replace('redis-cli ping', `redis-cli -p ${port} ping`)),
        { env },
      );
    };
    const deadline = Date.now() + 10_000;
    while (!(await redisPing(port!, secret['redis-password']))) {
      if (Date.now() > deadline) throw new Error('redis-server did not start');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const probe of [container.livenessProbe, container.readinessProbe]) {
      const result = await runProbe(probe.exec.command as string[]);
      expect(result, result.stderr).toMatchObject({ code: 0 });
      expect(result.stdout.trim()).toBe('PONG');
    }
  });

  it('keeps the generated values across upgrades (lookup) and uses an existing Secret when told', async () => {
    await createNamespace(NAMESPACE);
    const kept = { 'state-key': 'k'.repeat(64), 'redis-password': 'p'.repeat(48) };
    const create = await kubectl([
      'create',
      'secret',
      'generic',
      SECRET,
      '-n',
      NAMESPACE,
      ...Object.entries(kept).map(([key, value]) => `--from-literal=${key}=${value}`),
    ]);
    expect(create.code, create.stderr).toBe(0);
    const upgraded = decoded(find(await render('--dry-run=server'), 'Secret', '-secrets')!);
    expect(upgraded).toEqual({ ...kept, 'redis.conf': `requirepass "${'p'.repeat(48)}"\n` });

    const own = await render('--set', 'secrets.existingSecret=my-secrets');
    expect(find(own, 'Secret', '-secrets')).toBeUndefined();
    expect(JSON.stringify(operatorEnv(own))).toContain('"name":"my-secrets"');
    expect(JSON.stringify(find(own, 'StatefulSet', '-redis')!.spec.template.spec.volumes)).toContain('"secretName":"my-secrets"');
  });
});

describe('security #11.1 the chart with an external Redis', () => {
  it('renders, for a URL without a password, a config the operator refuses unless config.allowInsecureRedis is set', async () => {
    const open = await render('--set', 'redis.url=redis://redis.example:6379');
    expect(find(open, 'StatefulSet', '-redis')).toBeUndefined();
    expect(operatorEnv(open).map((variable) => variable.name)).not.toContain('REDIS_PASSWORD');
    const secret = decoded(find(open, 'Secret', '-secrets')!);
    expect(Object.keys(secret).sort()).toEqual(['state-key']);
    expect(() => checkRedisCredentials(operatorConfig(open, { [SECRET]: secret }))).toThrow(/allowInsecureRedis/);

    const allowed = await render('--set', 'redis.url=redis://redis.example:6379', '--set', 'config.allowInsecureRedis=true');
    expect(() => checkRedisCredentials(operatorConfig(allowed, { [SECRET]: secret }))).not.toThrow();
  });

  it('refuses a redis.url with a password, which would sit in the ConfigMap, and takes a user name with the password from a Secret', async () => {
    for (const url of ['redis://:hunter2@redis.example:6379', 'rediss://default:hunter2@redis.example:6380/0']) {
      const result = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, '--set', `redis.url=${url}`]);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(/values don't meet the specifications of the schema.*\n.*\n- at '\/redis\/url'/);
    }
    const docs = await render('--set', 'redis.url=redis://default@redis.example:6379', '--set', 'redis.passwordSecretRef.name=redis-auth');
    const config = operatorConfig(docs, { 'redis-auth': { password: 'from-secret' }, [SECRET]: { 'state-key': 'k'.repeat(64) } });
    expect(config.redisUrl).toBe('redis://default@redis.example:6379');
    expect(() => checkRedisCredentials(config)).not.toThrow();
  });

  it('passes the password of redis.passwordSecretRef as REDIS_PASSWORD, and a rediss:// CA as redisCaFile', async () => {
    const docs = await render(
      '--set',
      'redis.url=rediss://redis.example:6380',
      '--set',
      'redis.passwordSecretRef.name=redis-auth',
      '--set',
      'redis.caSecretRef.name=redis-ca',
    );
    expect(operatorEnv(docs)).toContainEqual({
      name: 'REDIS_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'redis-auth', key: 'password' } },
    });
    const config = operatorConfig(docs, { 'redis-auth': { password: 'from-secret' }, [SECRET]: { 'state-key': 'k'.repeat(64) } });
    expect(config.redisCaFile).toBe('/etc/chamvi-redis-ca/ca.crt');
    expect(() => checkRedisCredentials(config)).not.toThrow();
    const pod = find(docs, 'Deployment')!.spec.template.spec;
    expect(pod.volumes).toContainEqual({
      name: 'redis-ca',
      secret: { secretName: 'redis-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
    });
  });

  it('renders a Redis behind Sentinel or a Redis Cluster (#17.2): no bundled Redis, the shape in config, every password from a Secret', async () => {
    const secrets = {
      'redis-auth': { password: 'data-pw' },
      'sentinel-auth': { 'sentinel-password': 'sentinel-pw' },
      [SECRET]: { 'state-key': 'k'.repeat(64) },
    };
    const sentinel = await render(
      '--set',
      'config.redisSentinels={sentinel-0.redis:26379,sentinel-1.redis:26379}',
      '--set',
      'config.redisSentinelMaster=runs',
      '--set',
      'redis.passwordSecretRef.name=redis-auth',
      '--set',
      'redis.sentinelPasswordSecretRef.name=sentinel-auth',
    );
    expect(find(sentinel, 'StatefulSet', '-redis')).toBeUndefined();
    expect(operatorEnv(sentinel)).toContainEqual({
      name: 'REDIS_SENTINEL_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'sentinel-auth', key: 'sentinel-password' } },
    });
    const sentinelConfig = operatorConfig(sentinel, secrets);
    expect(() => checkRedisCredentials(sentinelConfig)).not.toThrow();
    expect(redisTopology(sentinelConfig)).toMatchObject({
      mode: 'sentinel',
      options: {
        password: 'data-pw',
        sentinelPassword: 'sentinel-pw',
        name: 'runs',
        sentinels: [
          { host: 'sentinel-0.redis', port: 26379 },
          { host: 'sentinel-1.redis', port: 26379 },
        ],
      },
    });

    const cluster = await render(
      '--set',
      'config.redisClusterNodes={redis-0.redis:6379}',
      '--set',
      'redis.passwordSecretRef.name=redis-auth',
    );
    expect(find(cluster, 'StatefulSet', '-redis')).toBeUndefined();
    expect(redisTopology(operatorConfig(cluster, secrets))).toMatchObject({
      mode: 'cluster',
      nodes: [{ host: 'redis-0.redis', port: 6379 }],
      options: { redisOptions: { password: 'data-pw' } },
    });
    // The Sentinels' password is chart-owned: it never goes into the ConfigMap.
    expect(
      (await helm(['template', RELEASE, chartDir, '--set', 'config.allowRepo={https://x/*}', '--set', 'config.redisSentinelPassword=p']))
        .code,
    ).not.toBe(0);
  });
});
