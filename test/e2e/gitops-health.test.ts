// What Argo CD and Flux see of a run, by their own code (#15.1): every status a watch delivers
// while real runs go through every phase on the dev cluster (operator process, real Redis, kwok
// pods running the real toolbox, the scripted model) is fed to the Argo CD health script of
// docs/argocd/ in Argo CD's Lua VM (gopher-lua) and to kstatus (sigs.k8s.io/cli-utils, what
// Flux's health checks and `flux ... --wait` use). Each phase must read as the docs say.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { kubeconfigPath, kubectl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { argoHealth, argoHealthScript, gitopsHealthBinary, kstatusHealth } from '../support/gitops-health.ts';
import { applyIn, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { approveAsShown, runPlugin } from '../support/plugin.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-gitops-health';

let root: string;
let repoUrl: string;
let e2e: E2eOperator;
let stopWatch: () => void = () => {};
/** Every version of every run the API server sent the watch, in order. */
const seen: CodingRun[] = [];

const phaseOf = (name: string, wanted: string) =>
  eventually(
    async () => ((await runStatus<{ phase?: string }>(NS, name)).phase === wanted ? true : undefined),
    90_000,
    `${name} to be ${wanted}`,
  );

function gatedRun(name: string, spec: object = {}) {
  const turns = [{ toolCalls: [{ toolName: 'bash', input: { command: 'echo hi > hi.txt' } }] }, { text: 'done' }];
  return [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-script` }, data: { 'script.json': JSON.stringify({ turns }) } },
    {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name },
      spec: {
        task: 'Say hi.',
        repository: { url: repoUrl },
        model: { provider: 'scripted', scriptRef: { name: `${name}-script` } },
        approval: { tools: ['bash'] },
        ...spec,
      },
    },
  ];
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-gitops-health-'));
  repoUrl = createBareRepository(root);
  gitopsHealthBinary();
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-gitops-health',
    redisPrefix: `e2egh${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    // Two slots: two runs waiting for a human hold them, so a third is seen Queued.
    env: { CHAMVI_MAX_ACTIVE_RUNS: '2' },
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  const controller = await new Watch(kubeConfig).watch(
    `/apis/chamvi.dev/v1alpha1/namespaces/${NS}/codingruns`,
    {},
    (_type, object) => seen.push(structuredClone(object as CodingRun)),
    () => {},
  );
  stopWatch = () => controller.abort();
}, 400_000);

afterAll(async () => {
  stopWatch();
  await e2e?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('#15.1 Argo CD and kstatus read every phase of real runs as documented', () => {
  it('runs through Pending, Provisioning, Running, WaitingForApproval, Succeeded, Failed and Cancelled', async () => {
    await applyIn(NS, [...gatedRun('approved'), ...gatedRun('cancelled')]);
    await phaseOf('approved', 'WaitingForApproval');
    await phaseOf('cancelled', 'WaitingForApproval');
    await applyIn(NS, gatedRun('queued', { approval: { tools: [] } }));
    await phaseOf('queued', 'Pending');
    await applyIn(NS, gatedRun('refused', { repository: { url: 'https://github.com/not/allowed.git' } }));
    await phaseOf('refused', 'Failed');
    expect((await approveAsShown(['approved', '-n', NS])).approved.code).toBe(0);
    expect((await runPlugin(['cancel', 'cancelled', '-n', NS])).code).toBe(0);
    await phaseOf('approved', 'Succeeded');
    // #15.5: who approved is in status, as the API server authenticated the plugin's user.
    const me = (await kubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'])).stdout.trim();
    expect(me).not.toBe('');
    const approvals = (await runStatus<{ approvals?: object[] }>(NS, 'approved')).approvals;
    expect(approvals).toEqual([expect.objectContaining({ id: expect.any(String), toolName: 'bash', decision: 'approve', user: me })]);
    expect((await runPlugin(['logs', 'approved', '-n', NS])).stdout).toContain(`approved (sha256 `);
    expect((await runPlugin(['logs', 'approved', '-n', NS])).stdout).toContain(` by ${me} at `);
    await phaseOf('cancelled', 'Cancelled');
    await phaseOf('queued', 'Succeeded');
    // Let the watch deliver the last writes.
    await new Promise((resolve) => setTimeout(resolve, 1000));

    const scriptFile = join(root, 'health.lua');
    writeFileSync(scriptFile, argoHealthScript());
    const argo = argoHealth(scriptFile, seen);
    const kstatus = kstatusHealth(seen);
    const byPhase = new Map<string, Set<string>>();
    seen.forEach((run, index) => {
      // A status the operator has not caught up with (observedGeneration behind) reads as in progress whatever its phase.
      const current = (run.status?.observedGeneration ?? -1) === (run.metadata.generation ?? 0);
      const phase = run.metadata.deletionTimestamp ? 'Deleting' : current ? (run.status?.phase ?? 'none') : 'unobserved';
      const verdict = `argo=${argo[index]!.status}${argo[index]!.error ? `!${argo[index]!.error}` : ''} kstatus=${kstatus[index]!.status}${kstatus[index]!.error ? `!${kstatus[index]!.error}` : ''}`;
      byPhase.set(phase, (byPhase.get(phase) ?? new Set()).add(verdict));
    });
    const table = Object.fromEntries([...byPhase].map(([phase, verdicts]) => [phase, [...verdicts].sort()]));
    expect(table).toEqual({
      unobserved: ['argo=Progressing kstatus=InProgress'],
      Pending: ['argo=Progressing kstatus=InProgress'],
      Provisioning: ['argo=Progressing kstatus=InProgress'],
      Running: ['argo=Progressing kstatus=InProgress'],
      WaitingForApproval: ['argo=Suspended kstatus=InProgress'],
      Succeeded: ['argo=Healthy kstatus=Current'],
      Failed: ['argo=Degraded kstatus=Failed'],
      Cancelled: ['argo=Degraded kstatus=Failed'],
    });
    // The messages say what to do: the approve command, and the failure's reason.
    const waiting = seen.findIndex((run) => run.status?.phase === 'WaitingForApproval' && run.metadata.name === 'approved');
    expect(argo[waiting]!.message).toBe(`Waiting for approval of a bash call: kubectl codingrun approve approved -n ${NS} (or deny)`);
    const refused = seen.findIndex((run) => run.status?.phase === 'Failed');
    expect(argo[refused]!.message).toMatch(/^Failed \(RepoNotAllowed\): /);
    expect(kstatus[refused]!.message).toContain('allowRepo');
  }, 300_000);

  it('#15.2 a run deleted by its TTL and applied again as it was (a GitOps sync) is not run again, and stays; a changed spec runs', async () => {
    const turns = [{ text: 'Nothing to do.', usage: { inputTokens: 10, outputTokens: 2 } }];
    const script = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ttl-script' },
      data: { 'script.json': JSON.stringify({ turns }) },
    };
    const manifest = (task: string, ttlSecondsAfterFinished = 1) => ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'nightly' },
      spec: {
        task,
        repository: { url: repoUrl },
        model: { provider: 'scripted', scriptRef: { name: 'ttl-script' } },
        ttlSecondsAfterFinished,
      },
    });
    const gone = () =>
      eventually(
        async () => ((await kubectl(['get', 'crun', 'nightly', '-n', NS])).code !== 0 ? true : undefined),
        60_000,
        'nightly to be deleted by its TTL',
      );
    await applyIn(NS, [script, manifest('Say hello.')]);
    await gone();
    const records = JSON.parse((await kubectl(['get', 'configmap', 'chamvi-finished-runs', '-n', NS, '-o', 'jsonpath={.data}'])).stdout);
    expect(JSON.parse(records.nightly)).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });

    // What Argo CD (selfHeal, or its next sync) and Flux (its next interval) do: apply the same manifest again.
    await applyIn(NS, [manifest('Say hello.')]);
    const replayed = await eventually(
      async () => {
        const status = await runStatus<{ phase?: string; reason?: string; steps?: number; message?: string }>(NS, 'nightly');
        return status.reason === 'AlreadyFinished' ? status : undefined;
      },
      60_000,
      'nightly to be recognised as already finished',
    );
    expect(replayed).toMatchObject({ phase: 'Succeeded' });
    expect(replayed.steps).toBeUndefined();
    expect(replayed.message).toContain('Not run again');
    // It stays (its TTL does not apply), so the GitOps tool sees it in sync and stops re-creating it.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    expect((await runStatus<{ reason?: string }>(NS, 'nightly')).reason).toBe('AlreadyFinished');
    const [health] = kstatusHealth([JSON.parse((await kubectl(['get', 'crun', 'nightly', '-n', NS, '-o', 'json'])).stdout)]);
    expect(health!.status).toBe('Current');

    // A changed task is a new job: deleted by hand and applied changed, it runs.
    expect((await kubectl(['delete', 'crun', 'nightly', '-n', NS, '--wait=true'])).code).toBe(0);
    await applyIn(NS, [manifest('Say hello again.', 3600)]);
    await eventually(
      async () => ((await runStatus<{ reason?: string }>(NS, 'nightly')).reason === 'Completed' ? true : undefined),
      60_000,
      'the changed nightly to run',
    );
  }, 200_000);
});
