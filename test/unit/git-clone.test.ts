// The operator's clone with real git against loopback servers and generated repositories:
// - #11.4: the token reaches the checked origin (control), never a host a redirect names, never
//   an http:// downgrade, and never a message;
// - #11.7: a repository bomb is refused from its tree before it is checked out, a tree that fans
//   out exponentially costs no more than maxCheckoutFiles, the download itself is bounded, each
//   git's memory too (a commit too large to read whole), and in-tree .gitattributes cannot make
//   the checkout larger than its blobs;
// - the revision is a ref name, never a refspec (`a:refs/replace/x` wrote refs into the clone the
//   cache hands on), an option or a NUL, refused before git runs; and a replace ref cannot make
//   the checkout another tree than the commit's (GIT_NO_REPLACE_OBJECTS).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRepositoryAllowed, type CheckedRepositoryUrl } from '../../operator/src/reconcile/allow-repo.ts';
import { cloneMeasured, cloneRepository, remoteCommit } from '../../operator/src/workers/git-clone.ts';
import { launchHere, ProcessLauncher, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { InvalidRevisionError } from '../../operator/src/api/invalid-revision-error.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { startGitHttpServer } from '../support/git-http-server.ts';

const isRunFailure = (error: unknown, reason: string): boolean => RunFailure.isInstance(error) && error.reason === reason;

const TOKEN = 'ghp_planted0123456789abcdefTOKEN';
const BASIC = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
const MiB = 1024 * 1024;
const LIMITS = { maxCheckoutBytes: 1024 * MiB, maxCheckoutFiles: 250_000 };
const scratch = mkdtempSync(join(tmpdir(), 'git-clone-test-'));
const servers: Server[] = [];

/** As the prepare job does: only a URL allowRepo accepted reaches cloneRepository. */
function checked(url: string): CheckedRepositoryUrl {
  const decision = isRepositoryAllowed(url, ['http://127.0.0.1:*/**', 'https://127.0.0.1:*/**', 'file:///**']);
  if (!decision.allowed) throw new Error(decision.message);
  return decision.url;
}

interface Recorder {
  url: string;
  authorizations: string[];
  requests: string[];
}

async function listen(server: Server, scheme: 'http' | 'https'): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A git server that wants Basic auth and records what it was sent (then refuses: nothing to clone). */
async function authServer(): Promise<Recorder> {
  const recorder: Recorder = { url: '', authorizations: [], requests: [] };
  const server = createServer((request, response) => {
    recorder.requests.push(request.url ?? '');
    const authorization = request.headers.authorization;
    if (!authorization) {
      response.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
      return;
    }
    recorder.authorizations.push(authorization);
    response.writeHead(403).end(`forbidden for ${authorization}`);
  });
  recorder.url = await listen(server, 'http');
  return recorder;
}

const redirectTo = (target: string) => (request: IncomingMessage, response: ServerResponse) => {
  response.writeHead(302, { location: `${target}${request.url ?? '/'}` }).end();
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    maxBuffer: 64 * MiB,
  }).trim();
}

/** A bare repository whose one commit has `tree` (built by the callback with plumbing) as its root. */
function repositoryWithTree(name: string, build: (dir: string) => string): string {
  const dir = join(scratch, `${name}.git`);
  git(scratch, 'init', '-q', '--bare', dir);
  const tree = build(dir);
  const commit = git(dir, 'commit-tree', '-m', name, tree);
  git(dir, 'update-ref', 'refs/heads/main', commit);
  git(dir, 'symbolic-ref', 'HEAD', 'refs/heads/main');
  return dir;
}

function blob(dir: string, content: Buffer | string): string {
  const file = join(scratch, 'blob-input');
  writeFileSync(file, content);
  return git(dir, 'hash-object', '-w', file);
}

function mktree(dir: string, entries: string[]): string {
  return execFileSync('git', ['mktree'], { cwd: dir, input: `${entries.join('\n')}\n`, encoding: 'utf8' }).trim();
}

/** A repository on branch main with one commit ("one") of a.txt, for file:// clones. */
function oneCommitRepository(name: string): string {
  const work = join(scratch, name);
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(join(work, 'a.txt'), 'one\n');
  git(work, 'add', '.');
  git(work, 'commit', '-qm', 'one');
  return work;
}

function diskUsage(dir: string): number {
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
}

const launchers: ProcessLauncher[] = [];
/** The launcher helper's launch, as the operator starts git (the helper is TypeScript here, as under the dev operator). */
function helperLaunch(): Launch {
  const launcher = new ProcessLauncher(fileURLToPath(new URL('../../operator/src/process-launcher-main.ts', import.meta.url)), [
    '--import',
    'tsx',
  ]);
  launchers.push(launcher);
  return launcher.launch;
}

afterAll(() => {
  for (const launcher of launchers) launcher.close();
  for (const server of servers) server.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('security #11.4 the git credential stays with the checked origin', { timeout: 60_000 }, () => {
  it("answers the checked origin's challenge with the token through askpass, and keeps it out of the error (control)", async () => {
    const origin = await authServer();
    const error = await cloneRepository({
      url: checked(`${origin.url}/acme/private.git`),
      token: TOKEN,
      ...LIMITS,
      timeoutMs: 20_000,
    }).catch((e: unknown) => e);
    expect(isRunFailure(error, 'CloneFailed')).toBe(true);
    expect(origin.authorizations).toContain(BASIC);
    expect(origin.requests.every((url) => !url.includes(TOKEN))).toBe(true);
    expect((error as Error).message).not.toContain(TOKEN);
    expect((error as Error).message).toMatch(/^git clone failed: /);
  });

  it.each([
    ['from this process', () => launchHere],
    ['through the launcher helper', () => helperLaunch()],
  ])(
    'refuses a token that is not one token (a keystore with a NUL) before any git starts %s, with the value in no message',
    async (_, make) => {
      // Node refused the spawn and quoted the environment value: the run's status read
      // "git could not start: ... Received 'PKCS12-ish\x00<key material>'" (or AgentFailed, from this process).
      const canary = 'CANARY-KEY-MATERIAL-51c9';
      const origin = await authServer();
      const launched: string[] = [];
      const launch = make();
      const recorded: Launch = (command, args, options) => (launched.push(command), launch(command, args, options));
      const request = { url: checked(`${origin.url}/acme/private.git`), token: `PKCS12-ish\0${canary}`, ...LIMITS, launch: recorded };
      for (const refused of [
        await cloneRepository(request).catch((e: unknown) => e),
        await remoteCommit(request).catch((e: unknown) => e),
      ]) {
        expect(isRunFailure(refused, 'CloneFailed')).toBe(true);
        expect((refused as Error).message).toMatch(/^the git token is not one line of printable ASCII without spaces/);
        expect((refused as Error).message).not.toContain(canary);
      }
      expect(launched).toEqual([]);
      expect(origin.requests).toEqual([]);
    },
  );

  it('does not follow a redirect to another origin, which never gets the token', async () => {
    const other = await authServer();
    const origin = await listen(createServer(redirectTo(other.url)), 'http');
    const error = await cloneRepository({ url: checked(`${origin}/acme/private.git`), token: TOKEN, ...LIMITS, timeoutMs: 20_000 }).catch(
      (e: unknown) => e,
    );
    expect(isRunFailure(error, 'CloneFailed')).toBe(true);
    expect(other.authorizations).toEqual([]);
    expect(other.requests).toEqual([]);
    expect((error as Error).message).not.toContain(TOKEN);
  });

  describe('from https', () => {
    let previous: string | undefined;
    let httpsOrigin: string;
    let plain: Recorder;
    const httpsRequests: string[] = [];

    beforeAll(async () => {
      // A certificate for 127.0.0.1 that git trusts through GIT_SSL_CAINFO (which the clone
      // passes on: an admin's private CA).
      const key = join(scratch, 'key.pem');
      const cert = join(scratch, 'cert.pem');
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-keyout',
          key,
          '-out',
          cert,
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
          '-addext',
          'subjectAltName=IP:127.0.0.1',
        ],
        { stdio: 'ignore' },
      );
      previous = process.env.GIT_SSL_CAINFO;
      process.env.GIT_SSL_CAINFO = cert;
      plain = await authServer();
      // The https origin sends git to http:// (another port: the downgrade an attacker controls).
      const redirect = redirectTo(plain.url);
      const server = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (request, response) => {
        httpsRequests.push(request.url ?? '');
        redirect(request, response);
      });
      httpsOrigin = await listen(server as unknown as Server, 'https');
    });

    afterAll(() => {
      if (previous === undefined) delete process.env.GIT_SSL_CAINFO;
      else process.env.GIT_SSL_CAINFO = previous;
    });

    it('does not downgrade to http: the http server never gets the token', async () => {
      const error = await cloneRepository({
        url: checked(`${httpsOrigin}/acme/private.git`),
        token: TOKEN,
        ...LIMITS,
        timeoutMs: 20_000,
      }).catch((e: unknown) => e);
      expect(isRunFailure(error, 'CloneFailed')).toBe(true);
      // git did reach the https origin (TLS worked), and went no further.
      expect(httpsRequests.length).toBeGreaterThan(0);
      expect(plain.authorizations).toEqual([]);
      expect(plain.requests).toEqual([]);
      expect((error as Error).message).not.toContain(TOKEN);
    });
  });

  it('leaves nothing in the temp dir when the clone fails (askpass script included)', async () => {
    const origin = await authServer();
    const temp = mkdtempSync(join(tmpdir(), 'git-clone-temp-'));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = temp;
    try {
      const error = await cloneRepository({
        url: checked(`${origin.url}/acme/private.git`),
        token: TOKEN,
        ...LIMITS,
        timeoutMs: 20_000,
      }).catch((e: unknown) => e);
      expect(isRunFailure(error, 'CloneFailed')).toBe(true);
      expect(readdirSync(temp)).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      rmSync(temp, { recursive: true, force: true });
    }
  });
});

describe("security #11.7 the clone is bounded before it lands on the operator's disk", { timeout: 120_000 }, () => {
  let bomb: string;

  beforeAll(() => {
    // 64 entries naming one 1 MiB blob of zeros: a few KiB to fetch, 64 MiB checked out.
    bomb = repositoryWithTree('bomb', (dir) => {
      const zeros = blob(dir, Buffer.alloc(MiB));
      return mktree(
        dir,
        Array.from({ length: 64 }, (_, i) => `100644 blob ${zeros}\tcopy-${i}`),
      );
    });
  });

  it('refuses a repository bomb from its tree, with the figure, and leaves nothing behind', async () => {
    expect(diskUsage(bomb)).toBeLessThan(MiB);
    const temp = mkdtempSync(join(tmpdir(), 'git-clone-temp-'));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = temp;
    try {
      const error = await cloneRepository({ url: checked(`file://${bomb}`), maxCheckoutBytes: 16 * MiB, maxCheckoutFiles: 1000 }).catch(
        (e: unknown) => e,
      );
      expect(isRunFailure(error, 'CloneFailed')).toBe(true);
      expect((error as Error).message).toContain(
        'the checkout would be 64.0 MiB (67108864 bytes) in 64 files and directories, over maxCheckoutBytes 16.0 MiB',
      );
      expect(readdirSync(temp)).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      rmSync(temp, { recursive: true, force: true });
    }
  });

  it('checks the same bomb out when the bound allows it (the control: the bomb is real)', async () => {
    const dir = await cloneRepository({ url: checked(`file://${bomb}`), maxCheckoutBytes: 128 * MiB, maxCheckoutFiles: 1000 });
    try {
      expect(readdirSync(dir).filter((name) => name.startsWith('copy-'))).toHaveLength(64);
      expect(diskUsage(dir)).toBeGreaterThanOrEqual(64 * MiB);
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });

  it('stops reading a tree that fans out exponentially at maxCheckoutFiles', async () => {
    // 10 levels of 10 entries naming the level below: 10^10 files from a few hundred bytes.
    const gitBomb = repositoryWithTree('git-bomb', (dir) => {
      let tree = mktree(
        dir,
        Array.from({ length: 10 }, (_, i) => `100644 blob ${blob(dir, 'boom\n')}\tf${i}`),
      );
      for (let level = 0; level < 9; level++)
        tree = mktree(
          dir,
          Array.from({ length: 10 }, (_, i) => `040000 tree ${tree}\td${i}`),
        );
      return tree;
    });
    const started = Date.now();
    const error = await cloneRepository({ url: checked(`file://${gitBomb}`), maxCheckoutBytes: 1024 * MiB, maxCheckoutFiles: 5000 }).catch(
      (e: unknown) => e,
    );
    expect(isRunFailure(error, 'CloneFailed')).toBe(true);
    expect((error as Error).message).toContain('the checkout would have more than 5000 files and directories, over maxCheckoutFiles 5000');
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("reads a few bytes of each entry from the tree, whatever its paths' length: long paths over shared trees cost nothing more", async () => {
    // 300 files under 10 nested directories, every name 250 bytes: each path is 2.7 KB, so a
    // listing that printed paths read 830 KB; the reviewer's 400 levels over 249 shared
    // subtrees printed gigabytes from 20 KB, into the launcher helper's memory.
    const name = (prefix: string) => prefix.padEnd(250, 'x');
    const deep = repositoryWithTree('long-paths', (dir) => {
      const empty = blob(dir, '');
      let tree = mktree(
        dir,
        Array.from({ length: 300 }, (_, i) => `100644 blob ${empty}\t${name(`f${i}-`)}`),
      );
      for (let level = 0; level < 10; level++) tree = mktree(dir, [`040000 tree ${tree}\t${name(`d${level}-`)}`]);
      return tree;
    });
    const listed: number[] = [];
    const counting: Launch = (command, args, options) => {
      const child = launchHere(command, args, options);
      if (args.includes('ls-tree')) {
        listed.push(0);
        const index = listed.length - 1;
        child.stdout?.on('data', (chunk: Buffer) => (listed[index]! += chunk.length));
      }
      return child;
    };
    const { dir, size } = await cloneMeasured({ url: checked(`file://${deep}`), ...LIMITS, launch: counting });
    try {
      expect(size).toEqual({ bytes: 0, entries: 310, cut: false });
      expect(listed).toHaveLength(1);
      expect(listed[0]).toBeLessThanOrEqual(310 * 8); // "blob 0" and "tree -", each with its NUL
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });

  it.each([
    [
      'a git older than 2.36, which knows no ls-tree --format',
      'echo "error: unknown option \\\`format=%(objecttype) %(objectsize)\'" >&2; exit 129',
      'git ls-tree does not know --format: the clone measures trees with git 2.36 or later; install a newer git',
    ],
    [
      'an entry that is not a type and a size',
      "printf 'blob 3\\0blob three\\0'",
      'git ls-tree printed "blob three", not an entry\'s type and size',
    ],
  ])('fails the clone on %s rather than measure the tree wrong', async (_, script, message) => {
    const faked: Launch = (command, args, options) =>
      args.includes('ls-tree') ? launchHere('/bin/sh', ['-c', script], options) : launchHere(command, args, options);
    const work = oneCommitRepository(`fake-ls-tree-${message.length}`);
    const error = await cloneRepository({ url: checked(`file://${work}`), ...LIMITS, launch: faked }).catch((e: unknown) => e);
    expect(isRunFailure(error, 'CloneFailed')).toBe(true);
    expect((error as Error).message).toContain(message);
  });

  it('stops a download larger than the bound while it is written', async () => {
    const big = repositoryWithTree('incompressible', (dir) => {
      const random = blob(dir, execFileSync('head', ['-c', String(24 * MiB), '/dev/urandom'], { maxBuffer: 32 * MiB }));
      return mktree(dir, [`100644 blob ${random}\trandom.bin`]);
    });
    const error = await cloneRepository({ url: checked(`file://${big}`), maxCheckoutBytes: 2 * MiB, maxCheckoutFiles: 1000 }).catch(
      (e: unknown) => e,
    );
    expect(isRunFailure(error, 'CloneFailed')).toBe(true);
    expect((error as Error).message).toMatch(/the repository's download grew past 18\.0 MiB .* and was stopped/);
  });

  it("stops at git's memory limit a commit too large to read whole, and streams a file larger than the limit", async () => {
    // Served over smart HTTP, so that the server's git runs outside the operator's limit. The
    // bomb: a commit whose message is 40 MiB of one character, a pack of a few dozen KiB, which
    // git's index-pack reads whole to hash it. The file: 40 MiB of zeros, which git streams.
    const messageBomb = repositoryWithTree('message-bomb', (dir) => mktree(dir, [`100644 blob ${blob(dir, 'one\n')}\ta.txt`]));
    const message = join(scratch, 'bomb-message');
    writeFileSync(message, `${'0'.repeat(40 * MiB)}\n`);
    git(
      messageBomb,
      'update-ref',
      'refs/heads/main',
      git(messageBomb, 'commit-tree', '-F', message, git(messageBomb, 'rev-parse', 'main^{tree}')),
    );
    repositoryWithTree('large-file', (dir) => mktree(dir, [`100644 blob ${blob(dir, Buffer.alloc(40 * MiB))}\tzeros.bin`]));
    const server = await startGitHttpServer(scratch, TOKEN);
    try {
      const limited = { token: TOKEN, ...LIMITS, maxGitMemoryBytes: 24 * MiB };
      const started = Date.now();
      const error = await cloneRepository({ url: checked(`${server.origin}/message-bomb.git`), ...limited }).catch((e: unknown) => e);
      expect(isRunFailure(error, 'CloneFailed')).toBe(true);
      expect((error as Error).message).toContain(
        'git clone needed more than the 24.0 MiB (25165824 bytes) of memory each git the operator runs may have: the repository holds an object too large to read whole',
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      const file = await cloneRepository({ url: checked(`${server.origin}/large-file.git`), ...limited });
      try {
        expect(statSync(join(file, 'zeros.bin')).size).toBe(40 * MiB);
      } finally {
        rmSync(join(file, '..'), { recursive: true, force: true });
      }
      // The control: under the default limit git reads the commit, and the clone is made.
      const bomb = await cloneRepository({ url: checked(`${server.origin}/message-bomb.git`), token: TOKEN, ...LIMITS });
      rmSync(join(bomb, '..'), { recursive: true, force: true });
    } finally {
      await server.close();
    }
  });

  it('clones a repository on this machine whose large file is a loose object under the limit: the serving git is not held to it', async () => {
    // git-upload-pack, which a file:// fetch starts, reads a loose object whole; it inherited the
    // limit and the clone failed (the faults tier's 50 MiB file). It lifts the soft limit now.
    const work = oneCommitRepository('loose-large');
    writeFileSync(join(work, 'big.txt'), 'x'.repeat(40 * MiB));
    git(work, 'add', 'big.txt');
    git(work, 'commit', '-qm', 'big');
    expect(git(work, 'count-objects', '-v')).toMatch(/^count: [1-9]/m);
    const dir = await cloneRepository({ url: checked(`file://${work}`), ...LIMITS, maxGitMemoryBytes: 24 * MiB });
    try {
      expect(statSync(join(dir, 'big.txt')).size).toBe(40 * MiB);
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });

  it('checks out the blobs byte for byte: in-tree .gitattributes cannot enlarge the checkout', async () => {
    // eol=crlf would double a file of newlines; ident turns each 4-byte $Id$ into 47 bytes.
    const amplifier = repositoryWithTree('amplifier', (dir) =>
      mktree(dir, [
        `100644 blob ${blob(dir, '* text eol=crlf\n*.id ident\n')}\t.gitattributes`,
        `100644 blob ${blob(dir, '\n'.repeat(MiB))}\tnewlines.txt`,
        `100644 blob ${blob(dir, '$Id$'.repeat(MiB / 4))}\tids.id`,
      ]),
    );
    const dir = await cloneRepository({ url: checked(`file://${amplifier}`), maxCheckoutBytes: 4 * MiB, maxCheckoutFiles: 1000 });
    try {
      expect(statSync(join(dir, 'newlines.txt')).size).toBe(MiB);
      expect(statSync(join(dir, 'ids.id')).size).toBe(MiB);
      expect(git(dir, 'status', '--porcelain')).toBe('');
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });

  it("leaves git's template out of the clone: no sample hooks or description reach the sandbox", async () => {
    const work = oneCommitRepository('template-work');
    const dir = await cloneRepository({ url: checked(`file://${work}`), ...LIMITS });
    try {
      const entries = readdirSync(join(dir, '.git'));
      expect(entries).not.toContain('hooks');
      expect(entries).not.toContain('description');
      expect(readdirSync(join(dir, '.git', 'info'))).toEqual(['attributes']);
      // Still a whole repository for the tools in the sandbox.
      expect(git(dir, 'status', '--porcelain')).toBe('');
      expect(git(dir, 'log', '--format=%s')).toBe('one');
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });

  it('clones the remote HEAD, a branch and a commit', async () => {
    const work = oneCommitRepository('plain-work');
    const first = git(work, 'rev-parse', 'HEAD');
    git(work, 'checkout', '-q', '-b', 'feature');
    writeFileSync(join(work, 'a.txt'), 'two\n');
    git(work, 'commit', '-qam', 'two');
    git(work, 'checkout', '-q', 'main');
    const url = checked(`file://${work}`);
    for (const [revision, content] of [
      [undefined, 'one\n'],
      ['feature', 'two\n'],
      [first, 'one\n'],
    ] as const) {
      const dir = await cloneRepository({ url, revision, ...LIMITS });
      try {
        expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe(content);
      } finally {
        rmSync(join(dir, '..'), { recursive: true, force: true });
      }
    }
  });
});

describe('the ref a clone took for its revision (what publishing checks the base against)', { timeout: 60_000 }, () => {
  it('is the branch or tag git fetched, a tag before a branch of the same name, and none for HEAD or a commit id', async () => {
    const work = oneCommitRepository('ref-work');
    const first = git(work, 'rev-parse', 'HEAD');
    git(work, 'branch', 'develop');
    git(work, 'branch', 'both');
    git(work, 'tag', 'both');
    git(work, 'tag', '-a', '-m', 'one', 'v1');
    git(work, 'update-ref', 'refs/pull/1/head', first);
    const url = checked(`file://${work}`);
    for (const [revision, expected] of [
      ['develop', 'refs/heads/develop'],
      ['refs/heads/develop', 'refs/heads/develop'],
      ['v1', 'refs/tags/v1'],
      ['both', 'refs/tags/both'],
      ['pull/1/head', 'refs/pull/1/head'],
      [undefined, undefined],
      [first, undefined],
    ] as const) {
      const clone = await cloneMeasured({ url, revision, ...LIMITS });
      try {
        expect(clone.revisionRef, String(revision)).toBe(expected);
        // Still no FETCH_HEAD in the clone: the name stays out of the archive.
        expect(readdirSync(join(clone.dir, '.git'))).not.toContain('FETCH_HEAD');
      } finally {
        rmSync(join(clone.dir, '..'), { recursive: true, force: true });
      }
    }
  });
});

describe("the operator's outbound proxy (chart proxy values)", { timeout: 60_000 }, () => {
  it('sends the clone through HTTP_PROXY when the operator has one, and straight to the server when NO_PROXY names it', async () => {
    const seen: string[] = [];
    const proxy = await listen(
      createServer((request, response) => {
        seen.push(request.url ?? '');
        response.writeHead(403).end('refused by the test proxy');
      }),
      'http',
    );
    const origin = await authServer();
    const url = checked(`${origin.url}/acme/via-proxy.git`);
    const saved = { http_proxy: process.env.http_proxy, no_proxy: process.env.no_proxy };
    try {
      process.env.http_proxy = proxy;
      delete process.env.no_proxy;
      await cloneRepository({ url, ...LIMITS, timeoutMs: 20_000 }).catch(() => undefined);
      // A proxy gets the absolute URL; the server itself was never asked.
      expect(seen[0]).toBe(`${origin.url}/acme/via-proxy.git/info/refs?service=git-upload-pack`);
      expect(origin.requests).toEqual([]);

      process.env.no_proxy = '127.0.0.1';
      seen.length = 0;
      await cloneRepository({ url, ...LIMITS, timeoutMs: 20_000 }).catch(() => undefined);
      expect(seen).toEqual([]);
      expect(origin.requests).toContain('/acme/via-proxy.git/info/refs?service=git-upload-pack');
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describe('the clone carries nothing of the run that made it (the clone cache hands its archive to other runs)', { timeout: 60_000 }, () => {
  it('names no revision and keeps no reflog: a hidden branch asked for is not in the archive, and the sandbox git still works', async () => {
    const work = oneCommitRepository('revision-work');
    // The same commit as main: the cache's key (URL and commit) is the same for a run asking for main.
    git(work, 'branch', 'secret-branch');
    const commit = git(work, 'rev-parse', 'HEAD');
    const dir = await cloneRepository({ url: checked(`file://${work}`), revision: 'secret-branch', ...LIMITS });
    try {
      // As the prepare job archives it: the tree with its .git.
      const archive = join(dir, '..', 'workspace.tar');
      execFileSync('tar', ['-C', dir, '-cf', archive, '.']);
      // Names and contents alike (tar stores both as bytes).
      expect(readFileSync(archive).toString('latin1')).not.toContain('secret-branch');
      expect(readdirSync(join(dir, '.git'))).not.toContain('logs');
      // What the sandbox asks of it: the commit, a clean status, and a diff against the commit.
      expect(git(dir, 'rev-parse', 'HEAD')).toBe(commit);
      expect(git(dir, 'status', '--porcelain')).toBe('');
      writeFileSync(join(dir, 'a.txt'), 'two\n');
      expect(git(dir, 'diff', commit, '--', 'a.txt')).toContain('+two');
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });
});

describe('security: the revision is a git ref name, never a refspec or an option', { timeout: 60_000 }, () => {
  /** launchHere, recording each command line. */
  function recording(): { launch: Launch; launched: string[][] } {
    const launched: string[][] = [];
    return { launched, launch: (command, args, options) => (launched.push([command, ...args]), launchHere(command, args, options)) };
  }

  it.each([
    // Refspecs: the first wrote a branch into the clone, the others every ref, or replace refs that show another tree.
    'main:refs/heads/planted',
    '+refs/*:refs/*',
    'refs/heads/*:refs/replace/*',
    'refs/heads/*',
    // An option, a NUL (the spawn threw: retried, then AgentFailed), a control character, a Unicode space.
    '--upload-pack=touch /tmp/x',
    'main\u0000',
    'main\u0001x',
    'main\u00a0',
    'refs/heads/../x',
  ])('refuses %j InvalidSpec before any git runs (clone and ls-remote)', async (revision) => {
    const url = checked(`file://${oneCommitRepository(`refspec-${Math.random().toString(36).slice(2)}`)}`);
    const { launch, launched } = recording();
    const cloned = await cloneMeasured({ url, revision, ...LIMITS, launch }).catch((e: unknown) => e);
    expect(InvalidRevisionError.isInstance(cloned)).toBe(true);
    expect(isRunFailure(cloned, 'InvalidSpec')).toBe(true);
    expect((cloned as Error).message).toMatch(/^spec\.repository\.revision .* must be a git ref name/);
    const asked = await remoteCommit({ url, revision, ...LIMITS, launch }).catch((e: unknown) => e);
    expect(isRunFailure(asked, 'InvalidSpec')).toBe(true);
    expect(launched).toEqual([]);
  });

  it('clones a branch, a full ref and a commit id the same way (the control: the check refuses no ref name)', async () => {
    const work = oneCommitRepository('refname-work');
    const commit = git(work, 'rev-parse', 'HEAD');
    for (const revision of ['main', 'refs/heads/main', commit]) {
      const { launch, launched } = recording();
      const dir = await cloneRepository({ url: checked(`file://${work}`), revision, ...LIMITS, launch });
      try {
        expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('one\n');
        expect(launched.some((line) => line.includes('fetch') && line.at(-1) === revision)).toBe(true);
        expect(git(dir, 'for-each-ref')).toBe('');
      } finally {
        rmSync(join(dir, '..'), { recursive: true, force: true });
      }
    }
  });

  it("checks out the commit's own tree though a replace ref names another (GIT_NO_REPLACE_OBJECTS)", async () => {
    const url = checked(`file://${oneCommitRepository('replace-work')}`);
    // Just before the checkout, a replace ref appears in the clone that swaps the fetched commit for one whose a.txt is "planted".
    const launch: Launch = (command, args, options) => {
      if (args.includes('checkout')) {
        const dir = options.cwd;
        const blob = execFileSync('git', ['hash-object', '-w', '--stdin'], { cwd: dir, input: 'planted\n', encoding: 'utf8' }).trim();
        const tree = execFileSync('git', ['mktree'], { cwd: dir, input: `100644 blob ${blob}\ta.txt\n`, encoding: 'utf8' }).trim();
        git(dir, 'replace', git(dir, 'rev-parse', 'FETCH_HEAD'), git(dir, 'commit-tree', '-m', 'planted', tree));
      }
      return launchHere(command, args, options);
    };
    const dir = await cloneRepository({ url, ...LIMITS, launch });
    try {
      expect(git(dir, 'for-each-ref')).toMatch(/refs\/replace\//); // the plant took
      expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('one\n');
    } finally {
      rmSync(join(dir, '..'), { recursive: true, force: true });
    }
  });
});
