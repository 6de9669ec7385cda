// The prepare job's clone leaves the worker's /tmp (an emptyDir whose sizeLimit evicts the
// operator) as soon as nothing reads it: not after spec.sandbox.setup, which may take 30
// minutes while the pack, the tree and their archive (about four times the checkout) wait.
// The clone is real git in a /tmp of the test's own (TMPDIR); the sandbox is a recorder whose
// setup holds until the test has looked.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { CloneCache } from '../../operator/src/workers/clone-cache.ts';
import { runPrepareJob } from '../../operator/src/workers/prepare-job.ts';
import { gitRepository, prepareJobHarness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-clone-removal-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ref = { uid: 'uid-1', namespace: 'ns', name: 'r' };
const SETUP = 'npm ci';

// The job's clones, and the clone cache's directory, are made under os.tmpdir(), which reads TMPDIR.
let workerTmp: string;
let savedTmp: string | undefined;
beforeEach(() => {
  workerTmp = mkdtempSync(join(scratch, 'worker-tmp-'));
  savedTmp = process.env.TMPDIR;
  process.env.TMPDIR = workerTmp;
});
afterEach(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
});

/** Every file under the worker's /tmp, relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => !entry.isDirectory())
    .map((entry) => relative(workerTmp, join(entry.parentPath, entry.name)))
    .sort();
}

/** A run with a setup, and a sandbox that records the archive it is sent and holds the setup until released. */
function harness(url: string, cloneCache?: CloneCache) {
  const { deps, run } = prepareJobHarness(url, [`file://${scratch}/**`]);
  run.spec.sandbox = { setup: SETUP };
  let reached!: () => void;
  let release!: () => void;
  const setup = {
    reached: new Promise<void>((resolve) => (reached = resolve)),
    released: new Promise<void>((resolve) => (release = resolve)),
    release: () => release(),
  };
  const chunks: Uint8Array[] = [];
  const cacheResults: string[] = [];
  deps.sandboxes.for = () => ({
    open: async () => undefined,
    close: async () => undefined,
    importTree: async (tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream) => {
      for await (const chunk of tar as AsyncIterable<Uint8Array>) chunks.push(chunk);
    },
    call: async (request: ToolRequest): Promise<ToolResponse> => {
      if ((request.input as { command?: string }).command === SETUP) {
        reached();
        await setup.released;
      }
      return { ok: true, result: { exitCode: 0, stdout: '', stderr: '', timedOut: false } } as ToolResponse;
    },
  });
  deps.states = { load: async () => undefined, create: async () => true } as unknown as typeof deps.states;
  deps.queue = { step: async () => undefined } as unknown as typeof deps.queue;
  deps.metrics = {
    ...deps.metrics,
    cloneCache: { inc: ({ result }: { result: string }) => cacheResults.push(result) },
  } as unknown as typeof deps.metrics;
  if (cloneCache) deps.cloneCache = cloneCache;
  return { deps, setup, cacheResults, imported: () => Buffer.concat(chunks) };
}

/** Runs the prepare job up to its setup, returns what `look` saw of /tmp there, then lets the job finish. */
async function duringSetup<T>(prepared: ReturnType<typeof harness>, look: () => Promise<T>): Promise<T> {
  const job = runPrepareJob(prepared.deps, ref, 'pod-1');
  try {
    await Promise.race([
      prepared.setup.reached,
      job.then(() => {
        throw new Error('the job ended without running its setup');
      }),
    ]);
    return await look();
  } finally {
    prepared.setup.release();
    await job;
  }
}

/** The entries of a tar archive. */
function tarEntries(archive: Buffer): string[] {
  const file = join(scratch, `listed-${process.hrtime.bigint()}.tar`);
  writeFileSync(file, archive);
  return execFileSync('tar', ['-tf', file], { encoding: 'utf8' }).split('\n');
}

describe("the prepare job's clone leaves the worker's /tmp before the setup", { timeout: 60_000 }, () => {
  it('holds none of the clone (tree, .git or archive) while the setup runs, and the sandbox got the whole tree', async () => {
    const prepared = harness(`file://${gitRepository(mkdtempSync(join(scratch, 'r-')))}`);
    await duringSetup(prepared, () => expect.poll(() => filesUnder(workerTmp), { timeout: 2_000 }).toEqual([]));
    expect(tarEntries(prepared.imported())).toContain('./.git/HEAD');
  });

  it('with the clone cache: only the kept archive stays while the setup runs, and the next run of the commit imports it', async () => {
    const cache = new CloneCache(1024 ** 3);
    try {
      const url = `file://${gitRepository(mkdtempSync(join(scratch, 'r-')))}`;
      const onlyTheCache = () =>
        expect
          .poll(() => filesUnder(workerTmp), { timeout: 2_000 })
          .toEqual([expect.stringMatching(/^chamvi-clone-\d+-\w{6}\/[0-9a-f]{64}$/)]);
      const first = harness(url, cache);
      await duringSetup(first, onlyTheCache);
      expect(cache.size.archives).toBe(1);
      const second = harness(url, cache);
      await duringSetup(second, onlyTheCache);
      expect([first.cacheResults, second.cacheResults]).toEqual([['miss'], ['hit']]);
      expect(second.imported().length).toBeGreaterThan(0);
      expect(second.imported().equals(first.imported())).toBe(true);
    } finally {
      await cache.clear();
    }
  });
});
