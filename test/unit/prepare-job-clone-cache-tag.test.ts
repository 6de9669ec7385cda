// The prepare job with the clone cache on, for a run pinned to an annotated tag: its clone holds
// the tag object (the tag's name, tagger and message), so its archive is kept under that object
// and handed out only to a run whose remote names the same tag object. Real git (file://), a
// sandbox that records the archive it imports.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { CloneCache } from '../../operator/src/workers/clone-cache.ts';
import { runPrepareJob } from '../../operator/src/workers/prepare-job.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { prepareJobHarness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-clone-cache-tag-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ref = { uid: 'uid-1', namespace: 'ns', name: 'r' };

const caches: CloneCache[] = [];
afterEach(async () => {
  await Promise.all(caches.splice(0).map((cache) => cache.clear()));
});

/** A bare repository whose main is tagged `v1` by an annotated tag; its URL, commit and tag object. */
function taggedRepository(): { url: string; bare: string; commit: string; tag: string } {
  const root = mkdtempSync(join(scratch, 'repo-'));
  const url = createBareRepository(root);
  const bare = join(root, 'git', 'hello.git');
  git(['tag', '-a', '-m', 'Release 1: the acquisition', 'v1', 'main'], bare);
  return { url, bare, commit: git(['rev-parse', 'main'], bare).trim(), tag: git(['rev-parse', 'v1'], bare).trim() };
}

/** Runs the prepare job for a run of `url` at `revision`; what the cache said and what the sandbox imported. */
async function prepare(url: string, revision: string, cache: CloneCache): Promise<{ cache: string[]; imported: Buffer }> {
  const { deps, run } = prepareJobHarness(url, [`file://${scratch}/**`]);
  run.spec.repository.revision = revision;
  const chunks: Uint8Array[] = [];
  const results: string[] = [];
  deps.sandboxes.for = () => ({
    open: async () => undefined,
    close: async () => undefined,
    importTree: async (tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream) => {
      for await (const chunk of tar as AsyncIterable<Uint8Array>) chunks.push(chunk);
    },
    call: async (_request: ToolRequest): Promise<ToolResponse> =>
      ({ ok: true, result: { exitCode: 0, stdout: '', stderr: '', timedOut: false } }) as ToolResponse,
  });
  deps.states = { load: async () => undefined, create: async () => true } as unknown as typeof deps.states;
  deps.queue = { step: async () => undefined } as unknown as typeof deps.queue;
  deps.metrics = {
    ...deps.metrics,
    cloneCache: { inc: ({ result }: { result: string }) => results.push(result) },
  } as unknown as typeof deps.metrics;
  deps.cloneCache = cache;
  await runPrepareJob(deps, ref, 'pod-1');
  return { cache: results, imported: Buffer.concat(chunks) };
}

/** The workspace an archive unpacks to, for git to read its objects. */
function unpacked(archive: Buffer): string {
  const dir = mkdtempSync(join(scratch, 'workspace-'));
  const file = join(dir, '..', `${dir.split('/').pop()}.tar`);
  writeFileSync(file, archive);
  mkdirSync(dir, { recursive: true });
  execFileSync('tar', ['-C', dir, '-xf', file]);
  return dir;
}

/** Whether the workspace's .git holds the object `id`. */
function holds(workspace: string, id: string): boolean {
  try {
    git(['cat-file', '-e', id], workspace);
    return true;
  } catch {
    return false;
  }
}

/** The types of the objects the workspace's .git holds, one each. */
const objectTypes = (workspace: string) =>
  git(['cat-file', '--batch-all-objects', '--batch-check=%(objecttype)'], workspace).trim().split('\n');

describe('the clone cache and runs of an annotated tag', { timeout: 60_000 }, () => {
  it("keeps a run of an annotated tag, and a second run of the tag imports the first's archive, tag object and all", async () => {
    const repo = taggedRepository();
    const cache = new CloneCache(1024 ** 3);
    caches.push(cache);
    const first = await prepare(repo.url, 'v1', cache);
    expect(first.cache).toEqual(['miss']);
    expect(holds(unpacked(first.imported), repo.tag)).toBe(true); // the tag object came with the clone
    expect(cache.size.archives).toBe(1);
    const second = await prepare(repo.url, 'v1', cache);
    expect(second.cache).toEqual(['hit']);
    expect(second.imported.equals(first.imported)).toBe(true);
  });

  it('security: a run of the same commit by its id misses the tag run archive, and its own archive holds no tag object', async () => {
    const repo = taggedRepository();
    const cache = new CloneCache(1024 ** 3);
    caches.push(cache);
    expect((await prepare(repo.url, 'v1', cache)).cache).toEqual(['miss']);
    expect(cache.size.archives).toBe(1);
    for (const revision of [repo.commit, 'main']) {
      const byCommit = await prepare(repo.url, revision, cache);
      const workspace = unpacked(byCommit.imported);
      expect(git(['rev-parse', 'HEAD'], workspace).trim()).toBe(repo.commit);
      expect(objectTypes(workspace)).not.toContain('tag');
      expect(holds(workspace, repo.tag)).toBe(false);
      // By id it clones, and is kept under no tag; the branch's run then gets that one (the control: the cache is on).
      expect(byCommit.cache).toEqual([revision === 'main' ? 'hit' : 'miss']);
    }
    expect(cache.size.archives).toBe(2);
  });

  it('security: a run through the tag re-made with another message misses, and its archive holds the new tag object, not the first', async () => {
    const repo = taggedRepository();
    const cache = new CloneCache(1024 ** 3);
    caches.push(cache);
    expect((await prepare(repo.url, 'v1', cache)).cache).toEqual(['miss']);
    git(['tag', '-f', '-a', '-m', 'Release 1', 'v1', 'main'], repo.bare);
    const remade = git(['rev-parse', 'v1'], repo.bare).trim();
    expect(remade).not.toBe(repo.tag);
    const again = await prepare(repo.url, 'v1', cache);
    expect(again.cache).toEqual(['miss']);
    const workspace = unpacked(again.imported);
    expect(holds(workspace, remade)).toBe(true);
    expect(holds(workspace, repo.tag)).toBe(false);
    // Kept under the new tag object in turn: its next run hits.
    expect((await prepare(repo.url, 'v1', cache)).cache).toEqual(['hit']);
  });
});
