// A real Gitea for the publish tests: the binary build-gitea.sh builds from its Go module (once,
// into the cache), run on loopback with a throwaway work directory, sqlite, no SSH, no mail.
// Each start gets an admin user and an API token; tests create repositories through the API
// and read back branches and pull requests the operator made.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../../operator/src/cli/local/free-port.ts';

const buildScript = fileURLToPath(new URL('./build-gitea.sh', import.meta.url));

export interface GiteaServer {
  /** http://127.0.0.1:PORT, no trailing slash. */
  origin: string;
  user: string;
  password: string;
  /** An admin token with repository, issue, user and organisation scopes. */
  token: string;
  /** Calls the API as the admin; throws on a status >= 400 unless `allow` lists it. */
  api<T = unknown>(method: string, path: string, body?: unknown, allow?: number[]): Promise<{ status: number; body: T }>;
  /** A repository of the admin with a README on main; its clone URL. */
  createRepository(name: string): Promise<string>;
  /** A fresh token of the admin with the given scopes (for a token with too little). */
  createToken(name: string, scopes: string[]): Promise<string>;
  close(): Promise<void>;
}

/** Builds Gitea when the cache has none (minutes, once per machine); the binary's path. */
export function giteaBinary(): string {
  return execFileSync('bash', [buildScript], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 30 * 60_000 }).trim();
}

export async function startGitea(): Promise<GiteaServer> {
  const binary = giteaBinary();
  const source = join(dirname(dirname(binary)), 'src');
  const work = mkdtempSync(join(tmpdir(), 'chamvi-gitea-'));
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  mkdirSync(join(work, 'custom', 'conf'), { recursive: true });
  const config = join(work, 'custom', 'conf', 'app.ini');
  writeFileSync(
    config,
    [
      'APP_NAME = chamvi test forge',
      'RUN_MODE = prod',
      `WORK_PATH = ${work}`,
      '[database]',
      'DB_TYPE = sqlite3',
      `PATH = ${join(work, 'gitea.db')}`,
      '[repository]',
      `ROOT = ${join(work, 'repositories')}`,
      'DEFAULT_BRANCH = main',
      '[server]',
      'PROTOCOL = http',
      'HTTP_ADDR = 127.0.0.1',
      `HTTP_PORT = ${port}`,
      `ROOT_URL = ${origin}/`,
      'DISABLE_SSH = true',
      'START_SSH_SERVER = false',
      'OFFLINE_MODE = true',
      'LFS_START_SERVER = false',
      // Without the bindata tag, templates and locales are read from the module's source.
      `STATIC_ROOT_PATH = ${source}`,
      `APP_DATA_PATH = ${join(work, 'data')}`,
      '[security]',
      'INSTALL_LOCK = true',
      `SECRET_KEY = ${randomBytes(24).toString('hex')}`,
      `INTERNAL_TOKEN = ${randomBytes(32).toString('hex')}`,
      '[oauth2]',
      'ENABLED = false',
      '[service]',
      'DISABLE_REGISTRATION = true',
      '[mailer]',
      'ENABLED = false',
      '[session]',
      'PROVIDER = memory',
      '[cache]',
      'ADAPTER = memory',
      '[indexer]',
      'ISSUE_INDEXER_TYPE = db',
      'REPO_INDEXER_ENABLED = false',
      '[cron]',
      'ENABLED = false',
      '[log]',
      'MODE = console',
      'LEVEL = warn',
      `ROOT_PATH = ${join(work, 'log')}`,
      '',
    ].join('\n'),
  );
  const env = {
    ...process.env,
    GITEA_WORK_DIR: work,
    GITEA_CUSTOM: join(work, 'custom'),
    HOME: work,
    // The tests run as root on CI machines; Gitea refuses that unless told.
    GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT: 'true',
  };
  const run = (args: string[]) => execFileSync(binary, [...args, '--config', config], { env, cwd: work, stdio: 'pipe', timeout: 120_000 });
  run(['migrate']);
  const user = 'chamvi';
  const password = `pw-${randomBytes(8).toString('hex')}`;
  run([
    'admin',
    'user',
    'create',
    '--admin',
    '--username',
    user,
    '--password',
    password,
    '--email',
    'chamvi@example.test',
    '--must-change-password=false',
  ]);
  const output: string[] = [];
  const child: ChildProcess = spawn(binary, ['web', '--config', config], { env, cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const basic = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const call = async <T>(authorization: string, method: string, path: string, body?: unknown, allow: number[] = []) => {
    const response = await fetch(`${origin}/api/v1${path}`, {
      method,
      headers: { authorization, accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    if (response.status >= 400 && !allow.includes(response.status))
      throw new Error(`gitea ${method} ${path}: HTTP ${response.status}: ${text}`);
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
  };

  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(`${origin}/api/v1/version`)).ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gitea did not start on ${origin}:\n${output.join('').slice(-4000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const createToken = async (name: string, scopes: string[]) =>
    (await call<{ sha1: string }>(basic, 'POST', `/users/${user}/tokens`, { name, scopes })).body.sha1;
  const token = await createToken('admin', ['write:repository', 'write:issue', 'write:user', 'write:organization']);
  return {
    origin,
    user,
    password,
    token,
    api: (method, path, body, allow) => call(`token ${token}`, method, path, body, allow),
    async createRepository(name) {
      await call(`token ${token}`, 'POST', '/user/repos', { name, auto_init: true, default_branch: 'main', readme: 'Default' });
      return `${origin}/${user}/${name}.git`;
    },
    createToken,
    async close() {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(work, { recursive: true, force: true });
    },
  };
}
