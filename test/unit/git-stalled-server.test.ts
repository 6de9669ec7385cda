// A git server that accepts the connection and never answers, against the operator's real git:
// the clone's timeout must end git and the remote helper git started (git-remote-http, which
// shares git's stderr and holds the token in its environment), and the call must settle, with
// git started from this process and through the launcher's helper. Before, git alone was
// killed: the helper lived on, 'close' never came, and the job hung with its worker slot.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { isRepositoryAllowed, type CheckedRepositoryUrl } from '../../operator/src/reconcile/allow-repo.ts';
import { cloneRepository, isCloneFailure, remoteCommit } from '../../operator/src/workers/git-clone.ts';
import { launchHere, ProcessLauncher, type Launch } from '../../operator/src/workers/process-launcher.ts';

const TOKEN = 'ghp_stalled0123456789abcdefTOKEN';
const LIMITS = { maxCheckoutBytes: 1 << 20, maxCheckoutFiles: 100 };
const servers: Server[] = [];
const sockets: Socket[] = [];
const launchers: ProcessLauncher[] = [];

afterAll(() => {
  for (const socket of sockets) socket.destroy();
  for (const server of servers) server.close();
  for (const launcher of launchers) launcher.close();
});

/** Accepts every connection and keeps it open, saying nothing. */
async function stalledServer(): Promise<string> {
  const server = createServer((socket) => sockets.push(socket));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/acme/stalled.git`;
}

function checked(url: string): CheckedRepositoryUrl {
  const decision = isRepositoryAllowed(url, ['http://127.0.0.1:*/**']);
  if (!decision.allowed) throw new Error(decision.message);
  return decision.url;
}

/** Every live process (not this one) whose command line names `url` or whose environment holds the token. */
function survivors(url: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)) {
    const read = (file: string) => {
      try {
        return readFileSync(`/proc/${pid}/${file}`, 'latin1');
      } catch {
        return ''; // gone, or not ours
      }
    };
    const cmdline = read('cmdline').split('\0').join(' ');
    if (cmdline.includes(url) || read('environ').includes(TOKEN)) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

/** What is left once the kill has taken effect (a killed process can take a moment to go). */
async function survivorsAfterKill(url: string): Promise<string[]> {
  for (let tries = 0; tries < 50 && survivors(url).length > 0; tries++) await new Promise((resolve) => setTimeout(resolve, 100));
  return survivors(url);
}

const entry = fileURLToPath(new URL('../../operator/src/process-launcher-main.ts', import.meta.url));
const implementations: Array<[string, () => Launch]> = [
  ['from this process', () => launchHere],
  [
    'through the launcher helper',
    () => {
      // The helper is TypeScript here, as under the dev operator (node --import tsx).
      const launcher = new ProcessLauncher(entry, ['--import', 'tsx']);
      launchers.push(launcher);
      return launcher.launch;
    },
  ],
];

describe.each(implementations)('a git server that never answers, git started %s', { timeout: 30_000 }, (_name, make) => {
  const launch = make();

  it('fails ls-remote with the timeout, and no git-remote-http or token outlives it', async () => {
    const url = await stalledServer();
    const failure = await remoteCommit({ url: checked(url), token: TOKEN, ...LIMITS, timeoutMs: 1_000, launch }).catch((e: unknown) => e);
    expect(isCloneFailure(failure)).toBe(true);
    expect((failure as Error).message).toMatch(/^git ls-remote timed out/);
    expect(sockets.length).toBeGreaterThan(0); // the control: git did reach the server, which held on
    expect(await survivorsAfterKill(url)).toEqual([]);
  });

  it('fails the clone with the timeout, and no git-remote-http or token outlives it', async () => {
    const url = await stalledServer();
    const failure = await cloneRepository({ url: checked(url), token: TOKEN, ...LIMITS, timeoutMs: 1_000, launch }).catch(
      (e: unknown) => e,
    );
    expect(isCloneFailure(failure)).toBe(true);
    expect((failure as Error).message).toMatch(/^git clone timed out/);
    expect(await survivorsAfterKill(url)).toEqual([]);
  });

  it("ends a killed child's 'close' at its exit, even while a process in another session holds its pipes", async () => {
    // setsid puts the sleep outside the child's group, where no group kill reaches: only our
    // end of the pipes can be let go. It prints its pid so the test can end it.
    const child = launch('/bin/sh', ['-c', 'setsid sleep 30 & echo $!; exec sleep 30'], {
      cwd: tmpdir(),
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const outsider = await new Promise<number>((resolve) =>
      child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString()))),
    );
    try {
      const closed = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
      child.kill('SIGKILL');
      expect(await closed).toBe('SIGKILL');
    } finally {
      process.kill(outsider, 'SIGKILL');
    }
  });
});
