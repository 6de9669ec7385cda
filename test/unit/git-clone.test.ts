// The clone's credential path with real git against a loopback HTTP server that demands
// Basic auth: the token reaches the server through GIT_ASKPASS, and a failure's message
// (which ends up in status and Events) never contains it.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloneFailedError, cloneRepository } from '../../operator/src/workers/git-clone.ts';

const TOKEN = 'ghp_planted0123456789abcdefTOKEN';
let server: Server;
let base: string;
const authorizations: string[] = [];
const urls: string[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    urls.push(request.url ?? '');
    const authorization = request.headers.authorization;
    if (!authorization) {
      response.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
      return;
    }
    authorizations.push(authorization);
    response.writeHead(403).end(`forbidden for ${authorization}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server.close();
});

describe('cloneRepository', () => {
  it('answers the server\'s challenge with the token through askpass, and keeps it out of the error', async () => {
    const error = await cloneRepository({ url: `${base}/acme/private.git`, token: TOKEN, allowFileProtocol: false, timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(CloneFailedError.isInstance(error)).toBe(true);
    expect(authorizations).toContain(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`);
    expect(urls.every((url) => !url.includes(TOKEN))).toBe(true);
    expect((error as Error).message).not.toContain(TOKEN);
    expect((error as Error).message).toMatch(/git clone failed/);
  });

  it('refuses file:// unless allowed, and ext:: always', async () => {
    const file = await cloneRepository({ url: 'file:///etc', allowFileProtocol: false, timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect((file as Error).message).toMatch(/transport 'file' not allowed/);
    const ext = await cloneRepository({ url: 'ext::sh -c touch% /tmp/chamvi-pwned', allowFileProtocol: true, timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect((ext as Error).message).toMatch(/transport 'ext' not allowed/);
  });

  it('leaves nothing in the temp dir when the clone fails (askpass script included)', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'git-clone-test-'));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = scratch;
    try {
      const error = await cloneRepository({ url: `${base}/acme/private.git`, token: TOKEN, allowFileProtocol: false, timeoutMs: 20_000 }).catch((e: unknown) => e);
      expect(CloneFailedError.isInstance(error)).toBe(true);
      expect(readdirSync(scratch)).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
