// Issue #17.3, the clone cache on the local control plane: an operator with
// CHAMVI_CLONE_CACHE_MAX_BYTES set runs a private repository (a loopback smart-HTTP server that
// serves only the token) twice, and the second run starts from the first run's kept archive.
// Then the attack: runs of the same repository without the credential, or with a wrong one,
// while the tree sits in the cache, fail CloneFailed, as they would with no cache at all.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBareRepository } from '../support/git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.ts';
import { applyIn, eventsOf, finishedRun } from '../support/namespaced-runs.ts';
import type { OperatorProcess } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-clone-cache';
const TOKEN = `chamvi-clone-cache-${Date.now().toString(36)}`;

interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  result?: { diff: string };
}

let root: string;
let gitServer: GitHttpServer;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-clone-cache-'));
  createBareRepository(root);
  gitServer = await startGitHttpServer(join(root, 'git'), TOKEN);
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-clone-cache',
    redisPrefix: `e2eclcache${Date.now()}`,
    allowRepo: `${gitServer.origin}/**`,
    env: { CHAMVI_CLONE_CACHE_MAX_BYTES: String(64 * 1024 * 1024) },
    syncTimeoutMs: 60_000,
  }));
  const script = {
    turns: [
      { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, cache' } }] },
      { text: 'done' },
    ],
  };
  await applyIn(NS, [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'clone-token', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
      stringData: { token: TOKEN },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'wrong-token', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
      stringData: { token: `${TOKEN}-guessed` },
    },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'script' }, data: { 'script.json': JSON.stringify(script) } },
  ]);
}, 180_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  await gitServer?.close();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

function run(name: string, secret: string | undefined): object {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: {
      task: 'Greet the cache.',
      repository: { url: `${gitServer.origin}/hello.git`, ...(secret ? { credentialsSecretRef: { name: secret } } : {}) },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
  };
}

/** chamvi_clone_cache_total by result, from the operator's /metrics. */
async function cacheCounts(): Promise<Record<string, number>> {
  const port = (await operator.waitForLog('operator starting')).port as number;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^chamvi_clone_cache_total\{result="(\w+)"\} (\d+)$/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

const preparedMessage = (name: string) => eventsOf(NS, `involvedObject.name=${name},reason=Prepared`, 'jsonpath={.items[*].message}');

describe('issue #17.3 the clone cache', () => {
  it('starts a second run of the same commit from the kept archive, with the same tree', async () => {
    await applyIn(NS, [run('first', 'clone-token')]);
    const first = await finishedRun<RunStatus>(NS, 'first', 120_000);
    expect(first.phase).toBe('Succeeded');
    expect(first.result!.diff).toContain('-Hello\n+Hello, cache\n');
    expect(await preparedMessage('first')).not.toContain('clone cache');

    await applyIn(NS, [run('second', 'clone-token')]);
    const second = await finishedRun<RunStatus>(NS, 'second', 120_000);
    expect(second.phase).toBe('Succeeded');
    expect(await preparedMessage('second')).toMatch(/from the clone cache/);
    // The kept archive is the clone: the same file, the same edit, the same diff.
    expect(second.result!.diff).toBe(first.result!.diff);
    expect(await cacheCounts()).toEqual({ hit: 1, miss: 1 });
  });

  it('security: with the tree kept, a run without the credential or with a wrong one still fails CloneFailed', async () => {
    await applyIn(NS, [run('anonymous', undefined), run('guessed', 'wrong-token')]);
    for (const name of ['anonymous', 'guessed']) {
      const status = await finishedRun<RunStatus>(NS, name, 120_000);
      expect(status).toMatchObject({ phase: 'Failed', reason: 'CloneFailed' });
      expect(status.result?.diff ?? '').toBe('');
      expect(await preparedMessage(name)).toBe('');
    }
  });
});
