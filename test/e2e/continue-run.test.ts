// spec.continueFrom through the whole product: the operator as a process, the real API server,
// Redis, git and the toolbox in kwok pods, and a model over HTTP that records what it was sent.
// A follow-up run starts from the first run's commit (not the branch's new head) with its diff
// applied and its task and final message in the first prompt; a source that is missing, has not
// finished or whose diff does not apply fails the follow-up InvalidSpec with what to change, and one deleted
// and created again under its name after the follow-up was accepted fails it ContinueFromReplaced.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { CodingRunStatus } from '../../operator/src/api/index.ts';
import { REFUSE_CLEANUP_FINALIZER, applyAdmissionPolicy } from '../support/admission-policy.ts';
import { createNamespace, kubeconfigPath, kubectl, redisUrl } from '../support/cluster.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const NS = 'e2e-continue';
const PREFIX = `e2econt${Date.now()}`;
const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;
let fake: FakeOpenAIServer;

const apply = (...objects: object[]) => applyIn(NS, objects);

const finished = (name: string) =>
  finishedRun<CodingRunStatus>(NS, name, 60_000).catch(async (error: unknown) => {
    const problems = operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-10);
    console.error(`${name}: ${JSON.stringify(await runStatus(NS, name))}\n${problems.map((line) => JSON.stringify(line)).join('\n')}`);
    throw error;
  });

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});

function codingRun(name: string, task: string, model: object, spec: object = {}) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: { task, repository: { url: repoUrl }, model, ...spec },
  };
}

const scripted = (scriptName: string) => ({ provider: 'scripted', scriptRef: { name: scriptName } });
const overHttp = (name: string) => ({ provider: 'openai-compatible', name, baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } });

/** A first run that greets the world in README.md and adds NOTES.md, and finishes. */
async function firstRun(name: string): Promise<CodingRunStatus> {
  await apply(
    script(`${name}-script`, [
      { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }] },
      { toolCalls: [{ toolName: 'write_file', input: { path: 'NOTES.md', content: 'first notes\n' } }] },
      { text: 'Greeted the world and left NOTES.md.' },
    ]),
    codingRun(name, 'Greet the world.', scripted(`${name}-script`)),
  );
  return finished(name);
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-continue-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n' });
  await createNamespace(NS, { restricted: true });
  await createNamespace(`${NS}-lease`);
  registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(root, 'workspaces') });
  fake = await startFakeOpenAIServer();
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
    stringData: { apiKey: 'sk-continue-e2e-key-0123456789' },
  });
  // The refused runs name it: they must fail for continueFrom alone, never reach the model.
  await apply(script('never-used', [{ text: 'should not be asked' }]));
  operator = new OperatorProcess({
    kubeconfig: kubeconfigPath(),
    env: {
      REDIS_URL: redisUrl(),
      CHAMVI_REDIS_PREFIX: PREFIX,
      CHAMVI_ALLOW_REPO: `file://${join(root, 'git')}/*`,
      CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
      CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL,
      CHAMVI_WATCH_NAMESPACES: NS,
      CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-lease`,
      CHAMVI_IDENTITY: 'e2e-continue',
    },
  });
  await operator.waitForLog('caches synced; reconciling');
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  await fake?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('spec.continueFrom', () => {
  it("starts from the first run's commit and diff, with its task and final message in the first prompt", async () => {
    const cloned = git(['rev-parse', 'main'], join(root, 'git', 'hello.git')).trim();
    const first = await firstRun('first');
    expect(first).toMatchObject({ phase: 'Succeeded', result: { revision: cloned } });

    // The branch moves on, in a way the first run's diff does not apply to: the follow-up must
    // clone the commit the first run recorded, not the branch's head.
    const source = join(root, 'source');
    git(['commit', '-qam', 'moved on', '--allow-empty'], source);
    git(['mv', 'README.md', 'README.txt'], source);
    git(['commit', '-qm', 'rename the README'], source);
    git(['push', '-q', join(root, 'git', 'hello.git'), 'main'], source);

    fake.enqueueFor(
      'continuer',
      { type: 'tool-calls', toolCalls: [{ name: 'read_file', arguments: { path: 'NOTES.md' } }] },
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello, world', newString: 'Hello, whole world' } }],
      },
      { type: 'text', text: 'Now greeting the whole world.' },
    );
    await apply(codingRun('second', 'Now greet the whole world.', overHttp('continuer'), { continueFrom: { name: 'first' } }));
    const second = await finished('second');
    expect(second).toMatchObject({ phase: 'Succeeded', steps: 3, result: { revision: cloned } });
    // Its diff is the tree it ended with: the first run's change built on, and the first run's new file.
    expect(second.result!.diff).toContain('-Hello\n+Hello, whole world\n');
    expect(second.result!.diff).toContain('+++ b/NOTES.md\n@@ -0,0 +1 @@\n+first notes\n');

    const requests = fake.requestsFor('continuer');
    const firstPrompt = JSON.stringify(requests[0]!.body);
    expect(firstPrompt).toContain('This run continues an earlier run, first.');
    expect(firstPrompt).toMatch(/<earlier-task-([0-9a-f]{32})>\\nGreet the world\.\\n<\/earlier-task-\1>/);
    expect(firstPrompt).toContain('Greeted the world and left NOTES.md.');
    // The read of NOTES.md found the first run's file in the workspace.
    expect(JSON.stringify(requests[1]!.body)).toContain('first notes');
  });

  it('fails InvalidSpec when the named run does not exist in the namespace', async () => {
    await apply(codingRun('orphan', 'Continue.', scripted('never-used'), { continueFrom: { name: 'no-such-run' } }));
    const status = await finished('orphan');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(status.message).toContain(`spec.continueFrom names CodingRun no-such-run, which does not exist in namespace ${NS}`);
  });

  it('fails InvalidSpec when the named run has not finished, saying to wait for it, before it takes a sandbox', async () => {
    await apply(
      script('waits-script', [{ toolCalls: [{ toolName: 'bash', input: { command: 'true' } }] }, { text: 'done' }]),
      codingRun('waits', 'Wait for a human.', scripted('waits-script'), { approval: { tools: ['bash'] } }),
    );
    await eventually(
      async () => ((await runStatus<CodingRunStatus>(NS, 'waits')).phase === 'WaitingForApproval' ? true : undefined),
      60_000,
      'waits to wait',
    );
    await apply(codingRun('too-early', 'Continue.', scripted('never-used'), { continueFrom: { name: 'waits' } }));
    const status = await finished('too-early');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(status.message).toContain(
      'which has not finished (phase WaitingForApproval); wait for it (kubectl wait --for=condition=Reconciling=False crun/waits) ' +
        'and create this run again',
    );
    // Refused at acceptance: no slot, no sandbox, nothing pinned.
    expect(status).not.toHaveProperty('podName');
    expect(status).not.toHaveProperty('continuedFrom');
  });

  it("fails InvalidSpec, applying nothing, when the source's diff ConfigMap was changed, or its diff does not apply on its commit", async () => {
    const tampered = await firstRun('tampered');
    expect(tampered.phase).toBe('Succeeded');
    expect(tampered.result!.diffSha256).toMatch(/^[0-9a-f]{64}$/);
    // The ConfigMap stays the run's (labels, owner); only its diff is changed, by whoever may edit ConfigMaps.
    const broken = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Goodbye\n+Hello\n';
    const patched = await kubectl([
      'patch',
      'configmap',
      tampered.result!.diffConfigMap!,
      '-n',
      NS,
      '--type=merge',
      '-p',
      JSON.stringify({ data: { diff: broken } }),
    ]);
    expect(patched.code, patched.stderr).toBe(0);
    await apply(codingRun('after-tampered', 'Continue.', scripted('never-used'), { continueFrom: { name: 'tampered' } }));
    const refused = await finished('after-tampered');
    expect(refused).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(refused.message).toContain('no longer holds the diff that run kept');

    // A run kept before status.result.diffSha256 existed: its ConfigMap is taken as it is, and git finds it does not fit.
    const older = await kubectl([
      'patch',
      'crun',
      'tampered',
      '-n',
      NS,
      '--subresource=status',
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/status/result/diffSha256"}]',
    ]);
    expect(older.code, older.stderr).toBe(0);
    await apply(codingRun('after-older', 'Continue.', scripted('never-used'), { continueFrom: { name: 'tampered' } }));
    const status = await finished('after-older');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(status.message).toContain(`whose diff does not apply on its commit ${tampered.result!.revision}`);
    expect(status.message).toContain('create a run without continueFrom');
  });

  it('fails ContinueFromReplaced, applying nothing, when the source is deleted and created again under its name after acceptance', async () => {
    const original = await firstRun('swapped');
    expect(original.phase).toBe('Succeeded');
    const uidOf = async (name: string) => (await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const originalUid = await uidOf('swapped');
    // The follow-up is held between its acceptance and its sandbox (so its prepare job): an
    // admission policy refuses its finalizer, and it waits Pending (SandboxRefused), accepted.
    const policy = 'e2e-continue-no-finalizer';
    const label = 'e2e-continue/refuse-finalizer';
    const labelled = (object: { metadata: object }, extra: object = {}) => ({
      ...object,
      metadata: { ...object.metadata, labels: { [label]: 'true' }, ...extra },
    });
    const removePolicy = await applyAdmissionPolicy({
      name: policy,
      namespace: NS,
      operations: ['CREATE', 'UPDATE'],
      label,
      validation: { expression: REFUSE_CLEANUP_FINALIZER, message: 'this test holds the follow-up before its sandbox' },
    });
    let replacementUid: string;
    try {
      const follower = labelled(codingRun('after-swap', 'Continue.', scripted('never-used'), { continueFrom: { name: 'swapped' } }));
      await eventually(
        async () => {
          const dryRun = await kubectl(['create', '--dry-run=server', '-n', NS, '-f', '-'], {
            input: stringify(labelled(follower, { finalizers: ['chamvi.dev/cleanup'] })),
          });
          return dryRun.code !== 0 && dryRun.stderr.includes(policy) ? true : undefined;
        },
        30_000,
        'the policy to be enforced',
      );
      await apply(follower);
      const held = await eventually(
        async () => {
          const status = await runStatus<CodingRunStatus>(NS, 'after-swap');
          return status.reason === 'SandboxRefused' ? status : undefined;
        },
        30_000,
        'after-swap to be accepted and held',
      );
      expect(held.continuedFrom).toEqual({ name: 'swapped', uid: originalUid });

      // Whoever may create runs in the namespace: the source goes, and another run of its name
      // (another change, finished, with its own diff ConfigMap) takes its place.
      const deleted = await kubectl(['delete', 'crun', 'swapped', '-n', NS, '--timeout=60s']);
      expect(deleted.code, deleted.stderr).toBe(0);
      await apply(
        script('swapped-again-script', [
          { toolCalls: [{ toolName: 'write_file', input: { path: 'UNCHECKED.md', content: 'never accepted\n' } }] },
          { text: 'Something else entirely.' },
        ]),
        codingRun('swapped', 'Something else.', scripted('swapped-again-script')),
      );
      const replacement = await finished('swapped');
      expect(replacement).toMatchObject({ phase: 'Succeeded', result: { diff: expect.stringContaining('UNCHECKED.md') } });
      replacementUid = await uidOf('swapped');
      expect(replacementUid).not.toBe(originalUid);
    } finally {
      await removePolicy();
    }
    // The follow-up gets its sandbox now, and its prepare job finds another run under the name.
    const status = await finished('after-swap');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ContinueFromReplaced', continuedFrom: { name: 'swapped', uid: originalUid } });
    expect(status.message).toContain(
      `spec.continueFrom names CodingRun swapped, which was deleted and created again under its name after this run was accepted (uid ${originalUid} then, ${replacementUid} now)`,
    );
    expect(status.result?.diff ?? '').not.toContain('UNCHECKED.md');
  });

  it('is described by kubectl explain and cannot change after the run is created', async () => {
    const explain = await kubectl(['explain', 'codingrun.spec.continueFrom']);
    expect(explain.stdout).toContain('Start from where a finished run left off');
    const changed = await kubectl([
      'patch',
      'crun',
      'orphan',
      '-n',
      NS,
      '--type=merge',
      '-p',
      '{"spec":{"continueFrom":{"name":"first"}}}',
    ]);
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toContain('spec.continueFrom cannot change after the run is created');
  });
});
