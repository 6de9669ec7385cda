// The shallow clone a run starts from, made in the worker (the sandbox has no network and
// never sees a credential). The token reaches git through GIT_ASKPASS and an environment
// variable: never on a command line (visible in ps) and never in a URL (visible in logs and
// errors). Remote helpers (`ext::`) are refused by configuration as well as by allowRepo.
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class CloneFailedError extends Error {
  override readonly name = 'CloneFailedError';
  readonly reason = 'CloneFailed';
  static isInstance(error: unknown): error is CloneFailedError {
    return error instanceof Error && error.name === 'CloneFailedError';
  }
}

export interface CloneRequest {
  url: string;
  revision?: string | undefined;
  token?: string | undefined;
  /** file:// is refused unless allowRepo lists a file:// pattern. */
  allowFileProtocol: boolean;
  timeoutMs?: number;
}

const COMMIT = /^[0-9a-f]{40}$/i;

function scrub(text: string, token: string | undefined): string {
  let out = text.replace(/\/\/[^/@\s]+@/g, '//***@');
  if (token) out = out.split(token).join('***');
  return out.trim().slice(-2000);
}

function git(config: string[], args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number, token: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [...config, ...args], { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-8000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => reject(new CloneFailedError(`git could not start: ${error.message}`)));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new CloneFailedError(signal ? `git ${args[0]} timed out` : `git ${args[0]} failed: ${scrub(stderr, token) || `exit ${code}`}`));
    });
  });
}

/** Clones into a new temporary directory and returns it (with .git, for git_diff in the sandbox). */
export async function cloneRepository(request: CloneRequest): Promise<string> {
  const base = await mkdtemp(join(tmpdir(), 'chamvi-clone-'));
  const dir = join(base, 'repo');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: base,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ALLOW_PROTOCOL: request.allowFileProtocol ? 'https:http:ssh:git:file' : 'https:http:ssh:git',
  };
  if (request.token) {
    const askpass = join(base, 'askpass.sh');
    // Username prompts get a fixed name; password prompts get the token from the env.
    await writeFile(askpass, '#!/bin/sh\ncase "$1" in Username*) echo x-access-token ;; *) printf "%s\\n" "$CHAMVI_GIT_TOKEN" ;; esac\n');
    await chmod(askpass, 0o700);
    env.GIT_ASKPASS = askpass;
    env.CHAMVI_GIT_TOKEN = request.token;
  }
  const timeoutMs = request.timeoutMs ?? 300_000;
  const config = ['-c', 'protocol.ext.allow=never', '-c', 'core.hooksPath=/dev/null', '-c', 'advice.detachedHead=false'];
  try {
    if (request.revision && COMMIT.test(request.revision)) {
      await git(config, ['init', '-q', dir], base, env, timeoutMs, request.token);
      await git(config, ['remote', 'add', 'origin', '--', request.url], dir, env, timeoutMs, request.token);
      await git(config, ['fetch', '-q', '--depth', '1', 'origin', request.revision], dir, env, timeoutMs, request.token);
      await git(config, ['checkout', '-q', 'FETCH_HEAD'], dir, env, timeoutMs, request.token);
    } else {
      const branch = request.revision ? ['--branch', request.revision] : [];
      await git(config, ['clone', '-q', '--depth', '1', '--no-tags', ...branch, '--', request.url, dir], base, env, timeoutMs, request.token);
    }
  } catch (error) {
    // The caller only owns the directory once it is returned: a failed clone (a partial
    // checkout, the askpass script) must not stay behind in the worker's temp dir.
    await rm(base, { recursive: true, force: true });
    throw error;
  }
  return dir;
}
