// What Argo CD and Flux see of a run, by their own code (#15.1): every status a watch delivers
// while real runs go through every phase on the dev cluster (operator process, real Redis, kwok
// pods running the real toolbox, the scripted model) is fed to the Argo CD health script of
// docs/argocd/ in Argo CD's Lua VM (gopher-lua) and to kstatus (sigs.k8s.io/cli-utils, what
// Flux's health checks and `flux ... --wait` use). Each phase must read as the docs say.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { kubeconfigPath } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { argoHealth, argoHealthScript, gitopsHealthBinary, kstatusHealth } from '../support/gitops-health.ts';
import { applyIn, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';
import { runPlugin } from '../support/plugin.ts';
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
    expect((await runPlugin(['approve', 'approved', '-n', NS])).code).toBe(0);
    expect((await runPlugin(['cancel', 'cancelled', '-n', NS])).code).toBe(0);
    await phaseOf('approved', 'Succeeded');
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
});
