// Security #11.5, performed as an attacker would: a model hides the dangerous part of a
// gated call past where the status used to cut it (4 KiB), and an approval of what was shown
// must not run what was not. The operator as a process, real Redis, real exec into kwok pods
// running the real toolbox, the real API server, and the real plugin for the honest approval.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPROVAL_ANNOTATION } from '../../operator/src/reconcile/approval-answer.ts';
import { kubectl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, eventsOf, runStatus } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';
import { approveAsShown } from '../support/plugin.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-approvals';
const PREFIX = `e2eappr${Date.now()}`;

interface RunStatus {
  phase?: string;
  message?: string;
  toolCalls?: number;
  pendingApproval?: { id: string; toolName: string; input: string; inputBytes?: number; inputSha256?: string };
  result?: { diff: string };
}

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

const apply = (...objects: object[]) => applyIn(NS, objects);
const statusOf = (name: string) => runStatus<RunStatus>(NS, name);

const phase = (name: string, wanted: string[], timeoutMs = 60_000) =>
  eventually(
    async () => {
      const status = await statusOf(name);
      return wanted.includes(status.phase ?? '') ? status : undefined;
    },
    timeoutMs,
    `${name} to reach ${wanted.join(' or ')}`,
  );

function gatedRun(name: string, turns: object[]) {
  return [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-script` }, data: { 'script.json': JSON.stringify({ turns }) } },
    {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name },
      spec: {
        task: 'Tidy the README.',
        repository: { url: repoUrl },
        model: { provider: 'scripted', scriptRef: { name: `${name}-script` } },
        approval: { tools: ['bash'] },
      },
    },
  ];
}

// The answers are raw JSON on purpose: some are not answers the plugin would write.
const annotate = (name: string, answer: object) =>
  kubectl(['annotate', 'crun', name, '-n', NS, `${APPROVAL_ANNOTATION}=${JSON.stringify(answer)}`, '--overwrite']);

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-approvals-'));
  repoUrl = createBareRepository(root);
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-approvals',
    redisPrefix: PREFIX,
    allowRepo: `file://${join(root, 'git')}/*`,
  }));
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('security #11.5 an approval runs exactly the input it names', () => {
  it('a 10 KiB call whose dangerous tail lies past any cut: approvals without its sha256 run nothing; the plugin approves the whole', async () => {
    // The first 4 KiB look harmless; the tail writes the proof that it ran.
    const command = `echo tidy > tidy.txt; : '${'x'.repeat(10 * 1024)}'; echo TAIL-RAN > tail.txt`;
    const input = JSON.stringify({ command });
    await apply(...gatedRun('hidden-tail', [{ toolCalls: [{ toolName: 'bash', input: { command } }] }, { text: 'done' }]));
    const waiting = await phase('hidden-tail', ['WaitingForApproval']);
    // The status holds the whole call, its size and digest: nothing to approve is hidden.
    expect(waiting.pendingApproval).toMatchObject({
      toolName: 'bash',
      input,
      inputBytes: Buffer.byteLength(input),
      inputSha256: sha256(input),
    });
    const id = waiting.pendingApproval!.id;

    // The attack: approve what a 4 KiB cut showed (its digest), then an approval with no digest.
    expect((await annotate('hidden-tail', { id, decision: 'approve', sha256: sha256(input.slice(0, 4096)) })).code).toBe(0);
    const refused = await eventually(
      async () => {
        const status = await statusOf('hidden-tail');
        return status.message?.startsWith('Refused the approval') ? status : undefined;
      },
      30_000,
      'the cut approval to be refused',
    );
    expect(refused).toMatchObject({ phase: 'WaitingForApproval', toolCalls: 0, pendingApproval: { id } });
    expect(refused.message).toContain(`but the input to run has sha256 ${sha256(input)}`);
    expect(await eventsOf(NS, 'involvedObject.name=hidden-tail,reason=ApprovalRefused')).not.toBe('');

    expect((await annotate('hidden-tail', { id, decision: 'approve' })).code).toBe(0);
    await eventually(
      async () => ((await statusOf('hidden-tail')).message?.includes('it carried no sha256') ? true : undefined),
      30_000,
      'the hashless approval to be refused',
    );
    expect(await statusOf('hidden-tail')).toMatchObject({ phase: 'WaitingForApproval', toolCalls: 0 });

    // The honest approval: the plugin shows the whole input, then its command sends that input's digest; now it runs.
    const { shown, approved } = await approveAsShown(['hidden-tail', '-n', NS, '--id', id]);
    expect(shown.stdout).toContain(input);
    expect(approved.stderr).toBe('');
    expect(approved.code).toBe(0);
    const done = await phase('hidden-tail', ['Succeeded', 'Failed']);
    expect(done).toMatchObject({ phase: 'Succeeded', toolCalls: 1 });
    expect(done.result!.diff).toContain('+TAIL-RAN');
  });

  it('a gated call too large to be shown whole (over 64 KiB) is denied at once and never runs', async () => {
    const command = `echo BIG-RAN > big.txt; : '${'y'.repeat(70 * 1024)}'`;
    await apply(...gatedRun('too-big', [{ toolCalls: [{ toolName: 'bash', input: { command } }] }, { text: 'done' }]));
    const done = await phase('too-big', ['Succeeded', 'Failed']);
    expect(done).toMatchObject({ phase: 'Succeeded', toolCalls: 1 });
    expect(done.result!.diff).toBe('');
    expect(await eventsOf(NS, 'involvedObject.name=too-big,reason=AwaitingApproval')).toBe('');
  });
});
